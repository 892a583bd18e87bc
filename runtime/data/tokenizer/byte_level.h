#pragma once
// The GPT-2 byte-level alphabet: every byte 0..255 is shown as one printable
// Unicode character (printable Latin-1 bytes as themselves, the others as
// U+0100 + k), so byte-level vocabularies (Llama-3, GPT-2) are JSON strings.
// The tokenizer works on raw bytes internally and converts vocab keys once.
#include <cstdint>
#include <string>
#include <string_view>

namespace hypertrain::tokenizer {

// Code point that shows byte b.
uint32_t ByteToChar(uint8_t b);
// Byte shown by code point cp, or -1 when cp is not in the alphabet.
int CharToByte(uint32_t cp);

// Raw bytes of a string written in the alphabet; false when a character is
// not in it (then *out is unspecified).
bool DecodeByteLevel(std::string_view shown, std::string* out);
// The alphabet form of raw bytes.
std::string EncodeByteLevel(std::string_view raw);

}  // namespace hypertrain::tokenizer
