#include "runtime/data/tokenizer/bpe.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <nlohmann/json.hpp>

#include "runtime/data/tokenizer/byte_level.h"
#include "runtime/data/tokenizer/utf8.h"

namespace hypertrain::tokenizer {
namespace {

constexpr size_t kMaxCachedPieceBytes = 256;
constexpr size_t kMaxCacheEntries = size_t{1} << 18;
constexpr size_t kShortWord = 48;  // symbols merged by rank scan (below) or heap

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581 "▁"

std::atomic<uint64_t> g_next_serial{1};

// Per-thread memo of pre-token -> ids for one model at a time.
struct Cache {
  uint64_t serial = 0;
  StringMap<std::pair<uint32_t, uint32_t>> index;  // piece -> (offset, count) in pool
  std::vector<int32_t> pool;
  void Reset(uint64_t s) {
    serial = s;
    index.Clear();
    pool.clear();
  }
};

Cache& ThreadCache(uint64_t serial) {
  thread_local Cache cache;
  if (cache.serial != serial || cache.index.size() >= kMaxCacheEntries ||
      cache.pool.size() >= 16 * kMaxCacheEntries) {
    cache.Reset(serial);
  }
  return cache;
}

// Scratch for the merge loop, reused per thread.
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  // Min-heap on (rank, pos) through std::push_heap's max-heap.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};
struct MergeScratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

bool HasCharBeforeMetaspace(std::string_view s) {
  for (size_t p = s.find(kMetaspace); p != std::string_view::npos; p = s.find(kMetaspace, p + 1)) {
    if (p >= kMetaspace.size() && s.substr(p - kMetaspace.size(), kMetaspace.size()) != kMetaspace) return true;
    if (p > 0 && p < kMetaspace.size()) return true;
  }
  return false;
}

}  // namespace

StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& model, bool byte_level) {
  using nlohmann::json;
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->serial_ = g_next_serial.fetch_add(1);
  m->byte_level_ = byte_level;
  auto flag = [&](const char* key) { return model.contains(key) && model[key].is_boolean() && model[key].get<bool>(); };
  auto str = [&](const char* key) {
    return model.contains(key) && model[key].is_string() ? model[key].get<std::string>() : std::string();
  };
  m->byte_fallback_ = flag("byte_fallback");
  m->ignore_merges_ = flag("ignore_merges");
  m->fuse_unk_ = flag("fuse_unk");
  m->continuing_subword_prefix_ = str("continuing_subword_prefix");
  m->end_of_word_suffix_ = str("end_of_word_suffix");
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0) {
    return InvalidArgument("tokenizer: BPE dropout is a training-time option; set \"dropout\": null");
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return InvalidArgument("tokenizer: BPE model has no \"vocab\" object");
  }
  int32_t max_id = -1;
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 31)) {
      return InvalidArgument(fmt::format("tokenizer: vocab entry '{}' has a bad id {}", token, id.dump()));
    }
    max_id = std::max(max_id, id.get<int32_t>());
  }
  m->id_to_token_.resize(static_cast<size_t>(max_id + 1));
  m->vocab_.Reserve(model["vocab"].size());
  m->shown_vocab_.reserve(model["vocab"].size());
  std::string raw;
  for (const auto& [token, id_json] : model["vocab"].items()) {
    const int32_t id = id_json.get<int32_t>();
    m->id_to_token_[id] = token;
    m->shown_vocab_.emplace(token, id);
    if (!byte_level) {
      m->vocab_.Insert(token, id);
    } else if (DecodeByteLevel(token, &raw)) {
      m->vocab_.Insert(raw, id);
    }  // else: not reachable from bytes (kept for decoding)
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const std::string unk = model["unk_token"].get<std::string>();
    auto it = m->shown_vocab_.find(unk);
    if (it == m->shown_vocab_.end()) {
      return InvalidArgument(fmt::format("tokenizer: unk_token '{}' is not in the vocab", unk));
    }
    m->unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    m->byte_ids_[b] = -1;
    m->fallback_ids_[b] = -1;
    if (byte_level) {
      const char c = static_cast<char>(b);
      if (const int32_t* id = m->vocab_.Find(std::string_view(&c, 1))) m->byte_ids_[b] = *id;
    }
    auto f = m->shown_vocab_.find(fmt::format("<0x{:02X}>", b));
    if (f != m->shown_vocab_.end()) m->fallback_ids_[b] = f->second;
  }
  // Merges: "a b" strings or ["a", "b"] pairs; rank = position.
  if (!model.contains("merges") || !model["merges"].is_array()) {
    return InvalidArgument("tokenizer: BPE model has no \"merges\" array");
  }
  const auto& merges = model["merges"];
  m->merges_.Reserve(merges.size());
  const size_t prefix_len = m->continuing_subword_prefix_.size();
  for (size_t r = 0; r < merges.size(); ++r) {
    std::string a, b;
    const auto& e = merges[r];
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return InvalidArgument(fmt::format("tokenizer: merge {} '{}' is not two tokens separated by one space", r, s));
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return InvalidArgument(fmt::format("tokenizer: merge {} is neither \"a b\" nor [\"a\", \"b\"]: {}", r, e.dump()));
    }
    auto ia = m->shown_vocab_.find(a), ib = m->shown_vocab_.find(b);
    if (ia == m->shown_vocab_.end() || ib == m->shown_vocab_.end()) {
      return InvalidArgument(fmt::format("tokenizer: merge {} '{} {}' uses a token missing from the vocab", r, a, b));
    }
    const std::string merged = a + (prefix_len > 0 && b.compare(0, prefix_len, m->continuing_subword_prefix_) == 0
                                        ? b.substr(prefix_len)
                                        : b);
    auto in = m->shown_vocab_.find(merged);
    if (in == m->shown_vocab_.end()) {
      return InvalidArgument(fmt::format("tokenizer: merge {} '{} {}' makes '{}', which is not in the vocab", r, a, b, merged));
    }
    // A repeated pair keeps its last rank, as in HF tokenizers.
    m->merges_.Insert(PairKey(ia->second, ib->second), Merge{static_cast<int32_t>(r), in->second});
  }
  m->plain_symbols_ = m->continuing_subword_prefix_.empty() && m->end_of_word_suffix_.empty();
  if (!byte_level) {
    for (const std::string& t : m->id_to_token_) {
      uint32_t cp;
      if (!t.empty() && DecodeUtf8(t.data(), t.size(), &cp) == static_cast<int>(t.size())) {
        m->char_ids_.Insert(cp, *m->vocab_.Find(t));
      }
    }
    m->metaspace_splittable_ = true;
    for (const std::string& t : m->id_to_token_) {
      if (HasCharBeforeMetaspace(t)) {
        m->metaspace_splittable_ = false;
        break;
      }
    }
  }
  return m;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = shown_vocab_.find(token);
  if (it == shown_vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::InitialSymbols(std::string_view piece, std::vector<int32_t>* ids) const {
  ids->clear();
  if (!byte_level_ && plain_symbols_) {
    // One symbol per character, found by code point.
    bool last_unk = false;
    size_t i = 0;
    while (i < piece.size()) {
      uint32_t cp;
      int len = DecodeUtf8(piece.data() + i, piece.size() - i, &cp);
      if (len == 0) len = 1, cp = ~0u;  // not reachable: Encode repairs UTF-8
      const std::string_view ch = piece.substr(i, len);
      i += len;
      if (const int32_t* id = char_ids_.Find(cp)) {
        ids->push_back(*id);
        last_unk = false;
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (unsigned char c : ch) all = all && fallback_ids_[c] >= 0;
        if (all) {
          for (unsigned char c : ch) ids->push_back(fallback_ids_[c]);
          last_unk = false;
          continue;
        }
      }
      if (unk_id_) {
        if (!(fuse_unk_ && last_unk)) ids->push_back(*unk_id_);
        last_unk = true;
      }
    }
    return;
  }
  if (byte_level_ && plain_symbols_) {
    for (unsigned char c : piece) {
      if (byte_ids_[c] >= 0) {
        ids->push_back(byte_ids_[c]);
      } else if (unk_id_ && !(fuse_unk_ && !ids->empty() && ids->back() == *unk_id_)) {
        ids->push_back(*unk_id_);
      }
    }
    return;
  }
  std::string key;
  bool last_unk = false;
  size_t i = 0;
  while (i < piece.size()) {
    const size_t len = byte_level_ ? 1 : static_cast<size_t>(Utf8CharLength(piece.data() + i, piece.size() - i));
    const std::string_view ch = piece.substr(i, len);
    const bool first = i == 0, last = i + len >= piece.size();
    std::string_view lookup = ch;
    if ((!first && !continuing_subword_prefix_.empty()) || (last && !end_of_word_suffix_.empty())) {
      key.assign(first ? std::string() : continuing_subword_prefix_);
      key.append(ch);
      if (last) key.append(end_of_word_suffix_);
      lookup = key;
    }
    i += len;
    if (const int32_t* id = vocab_.Find(lookup)) {
      ids->push_back(*id);
      last_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char c : ch) all = all && fallback_ids_[c] >= 0;
      if (all) {
        for (unsigned char c : ch) ids->push_back(fallback_ids_[c]);
        last_unk = false;
        continue;
      }
    }
    if (unk_id_) {
      if (!(fuse_unk_ && last_unk)) ids->push_back(*unk_id_);
      last_unk = true;
    }
  }
}

void BpeModel::MergeShort(std::vector<int32_t>* ids) const {
  constexpr int32_t kNone = INT32_MAX;
  int32_t rank[kShortWord], merged[kShortWord];
  int32_t n = static_cast<int32_t>(ids->size());
  int32_t* id = ids->data();
  auto pair = [&](int32_t i) {
    const Merge* m = merges_.Find(PairKey(id[i], id[i + 1]));
    rank[i] = m ? m->rank : kNone;
    merged[i] = m ? m->new_id : -1;
  };
  for (int32_t i = 0; i + 1 < n; ++i) pair(i);
  while (n > 1) {
    int32_t best = -1, best_rank = kNone;
    for (int32_t i = 0; i + 1 < n; ++i) {
      if (rank[i] < best_rank) best_rank = rank[i], best = i;
    }
    if (best < 0) break;
    id[best] = merged[best];
    for (int32_t i = best + 1; i + 1 < n; ++i) {
      id[i] = id[i + 1];
      rank[i] = rank[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) pair(best - 1);
    if (best + 1 < n) pair(best);
  }
  ids->resize(n);
}

void BpeModel::MergeLong(std::vector<int32_t>* ids) const {
  thread_local MergeScratch s;
  const int32_t n = static_cast<int32_t>(ids->size());
  s.symbols.resize(n);
  s.heap.clear();
  for (int32_t i = 0; i < n; ++i) s.symbols[i] = {(*ids)[i], i - 1, i + 1 < n ? i + 1 : -1, true};
  auto consider = [&](int32_t pos) {
    const int32_t next = s.symbols[pos].next;
    if (next < 0) return;
    const Merge* m = merges_.Find(PairKey(s.symbols[pos].id, s.symbols[next].id));
    if (m == nullptr) return;
    s.heap.push_back({m->rank, pos, m->new_id});
    std::push_heap(s.heap.begin(), s.heap.end());
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end());
    const Candidate top = s.heap.back();
    s.heap.pop_back();
    Symbol& left = s.symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = s.symbols[left.next];
    // A stale entry (its pair has changed since) no longer matches.
    const Merge* m = merges_.Find(PairKey(left.id, right.id));
    if (m == nullptr || m->new_id != top.new_id) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) s.symbols[right.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  ids->clear();
  for (int32_t i = 0; i >= 0; i = s.symbols[i].next) ids->push_back(s.symbols[i].id);
}

void BpeModel::EncodeUncached(std::string_view piece, std::vector<int32_t>* out) const {
  thread_local std::vector<int32_t> ids;
  InitialSymbols(piece, &ids);
  if (ids.size() <= kShortWord) MergeShort(&ids);
  else MergeLong(&ids);
  out->insert(out->end(), ids.begin(), ids.end());
}

void BpeModel::Encode(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (const int32_t* id = vocab_.Find(piece)) {
      out->push_back(*id);
      return;
    }
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    EncodeUncached(piece, out);
    return;
  }
  Cache& cache = ThreadCache(serial_);
  if (const auto* hit = cache.index.Find(piece)) {
    out->insert(out->end(), cache.pool.begin() + hit->first, cache.pool.begin() + hit->first + hit->second);
    return;
  }
  const size_t before = out->size();
  EncodeUncached(piece, out);
  const uint32_t at = static_cast<uint32_t>(cache.pool.size());
  cache.pool.insert(cache.pool.end(), out->begin() + before, out->end());
  cache.index.Insert(piece, std::make_pair(at, static_cast<uint32_t>(out->size() - before)));
}

}  // namespace hypertrain::tokenizer
