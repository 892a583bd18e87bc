#pragma once
// Open-addressing hash maps for the tokenizer's hot lookups (vocab, merges,
// per-thread cache): one probe sequence over a flat array instead of
// std::unordered_map's linked buckets, which dominated encode time.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace hypertrain::tokenizer {

// 64-bit hash of a short byte string (multiply-mix over 8-byte words).
inline uint64_t HashBytes(std::string_view s) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ (s.size() * kMul);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  if (i < s.size()) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

inline uint64_t HashU64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

// uint64 -> V. Keys are never ~0 (the empty marker).
template <typename V>
class U64Map {
 public:
  void Reserve(size_t n) { Rehash(Capacity(n)); }
  void Insert(uint64_t key, V value) {
    if ((size_ + 1) * 2 > slots_.size()) Rehash(Capacity(size_ + 1));
    size_t i = HashU64(key) & mask_;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    if (slots_[i].key == kEmpty) ++size_;
    slots_[i] = {key, value};
  }
  const V* Find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = HashU64(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    V value{};
  };
  static size_t Capacity(size_t n) {
    size_t c = 16;
    while (c < n * 2) c *= 2;
    return c;
  }
  void Rehash(size_t capacity) {
    if (capacity <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != kEmpty) Insert(s.key, s.value);
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// byte string -> V; keys are copied into one arena.
template <typename V>
class StringMap {
 public:
  void Reserve(size_t n) { Rehash(Capacity(n)); }
  // Inserts or overwrites.
  void Insert(std::string_view key, V value) {
    if ((size_ + 1) * 2 > slots_.size()) Rehash(Capacity(size_ + 1));
    const uint64_t h = HashBytes(key);
    size_t i = h & mask_;
    for (; slots_[i].used; i = (i + 1) & mask_) {
      if (slots_[i].hash == h && Key(slots_[i]) == key) {
        slots_[i].value = value;
        return;
      }
    }
    slots_[i] = {h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), true, value};
    arena_.append(key);
    ++size_;
  }
  const V* Find(std::string_view key) const {
    if (slots_.empty()) return nullptr;
    const uint64_t h = HashBytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.hash == h && Key(s) == key) return &s.value;
    }
  }
  size_t size() const { return size_; }
  size_t arena_bytes() const { return arena_.size(); }
  void Clear() {
    slots_.clear();
    arena_.clear();
    mask_ = size_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;
    uint32_t length = 0;
    bool used = false;
    V value{};
  };
  std::string_view Key(const Slot& s) const { return std::string_view(arena_).substr(s.offset, s.length); }
  static size_t Capacity(size_t n) {
    size_t c = 16;
    while (c < n * 2) c *= 2;
    return c;
  }
  void Rehash(size_t capacity) {
    if (capacity <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& s : old) {
      if (!s.used) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].used) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  std::string arena_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace hypertrain::tokenizer
