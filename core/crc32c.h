#pragma once
// CRC-32C (Castagnoli), the checksum of every checkpoint file. Uses the SSE4.2
// crc32 instruction when the CPU has it, a table otherwise; both give the same
// value. Extend(Extend(0, a), b) == Value(a + b).
#include <cstddef>
#include <cstdint>
#include <string>

namespace hypertrain {

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);
inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }
// Portable path only (tests compare it with the accelerated one).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size);
// 8 lower-case hex digits.
std::string Crc32cHex(uint32_t crc);

}  // namespace hypertrain
