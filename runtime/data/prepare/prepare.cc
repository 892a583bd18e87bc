#include "runtime/data/prepare/prepare.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "core/atomic_file.h"
#include "core/time.h"
#include "runtime/data/shard.h"
#include "runtime/data/tokenizer/tokenizer.h"
#include "runtime/data/tokenizer/utf8.h"

namespace hypertrain::data::prepare {
namespace {

namespace fs = std::filesystem;
using tokenizer::Tokenizer;

constexpr size_t kBatchBytes = 1 << 20;  // text per work item
constexpr size_t kBatchDocs = 1024;

struct WorkBatch {
  int64_t seq = 0;
  size_t input = 0;           // index into inputs
  int64_t bytes_done = 0;     // all inputs' bytes read once this batch was cut
  std::vector<Document> docs;
};

struct TokenBatch {
  size_t input = 0;
  int64_t bytes_done = 0;
  int64_t documents = 0;
  int64_t invalid_utf8 = 0;
  std::vector<uint32_t> tokens;
};

// The shared state of one run: queues, the first error, the stop flag.
struct Pipeline {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<WorkBatch> work;
  bool reading_done = false;
  std::map<int64_t, TokenBatch> results;
  int64_t next_to_write = 0;
  int64_t batches = -1;  // total, once reading is done
  Status error;
  bool stop = false;
  void Fail(Status s) {
    std::lock_guard<std::mutex> l(mu);
    if (error.ok()) error = std::move(s);
    stop = true;
    cv.notify_all();
  }
};

// Removes the temporary directory unless released.
struct TempDir {
  std::string path;
  bool keep = false;
  ~TempDir() {
    if (!keep && !path.empty()) (void)RemoveTree(path);
  }
};

std::string Duration(double s) {
  const int64_t t = static_cast<int64_t>(s + 0.5);
  return t >= 3600 ? fmt::format("{}:{:02d}:{:02d}", t / 3600, (t / 60) % 60, t % 60)
                   : fmt::format("{}:{:02d}", t / 60, t % 60);
}

Status CheckOutDir(const PrepareOptions& o) {
  std::error_code ec;
  if (!fs::exists(o.out_dir, ec)) return Status::Ok();
  if (!fs::is_directory(o.out_dir, ec)) {
    return InvalidArgument(fmt::format("--out {} exists and is not a directory", o.out_dir));
  }
  auto it = fs::directory_iterator(o.out_dir, ec);
  if (ec) return InvalidArgument(fmt::format("--out {}: cannot list: {}", o.out_dir, ec.message()));
  if (it != fs::directory_iterator() && !o.overwrite) {
    return InvalidArgument(fmt::format("--out {} is not empty (holds {}): refusing to mix old and new shards; "
                                       "pass --overwrite to replace it",
                                       o.out_dir, it->path().filename().string()));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<DataManifest> Prepare(const PrepareOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.inputs.empty()) return InvalidArgument("prepare: no inputs given");
  if (o.out_dir.empty()) return InvalidArgument("prepare: --out is required");
  if (o.tokens_per_shard < 2) return InvalidArgument(fmt::format("prepare: --tokens-per-shard {} must be >= 2", o.tokens_per_shard));
  HT_RETURN_IF_ERROR(CheckOutDir(o));

  // Every input must exist and be readable before any work starts.
  DataManifest manifest;
  int64_t total_bytes = 0;
  for (const std::string& in : o.inputs) {
    HT_ASSIGN_OR_RETURN(int64_t bytes, InputBytes(in, o.input));
    HT_ASSIGN_OR_RETURN(auto probe, OpenDocuments(in, o.input));
    manifest.inputs.push_back({in, probe->format(), bytes, 0, 0});
    total_bytes += bytes;
  }

  std::unique_ptr<Tokenizer> tok;
  std::vector<uint32_t> prefix, suffix;
  if (!o.tokenizer_dir.empty()) {
    HT_ASSIGN_OR_RETURN(tok, Tokenizer::FromDir(o.tokenizer_dir));
    if (!tok->eos_id()) {
      return InvalidArgument(fmt::format("tokenizer {} has no eos_token (tokenizer_config.json) to end documents with",
                                         o.tokenizer_dir));
    }
    const bool bos = o.bos == BosPolicy::kAlways || (o.bos == BosPolicy::kAuto && tok->add_bos());
    if (bos && !tok->bos_id()) return InvalidArgument(fmt::format("tokenizer {} has no bos_token", o.tokenizer_dir));
    if (bos) prefix.push_back(static_cast<uint32_t>(*tok->bos_id()));
    suffix.push_back(static_cast<uint32_t>(*tok->eos_id()));
    manifest.tokenizer = {"hf", fs::absolute(o.tokenizer_dir).string(), tok->sha256(), tok->vocab_size(),
                          tok->bos_id(), tok->eos_id(), bos, tok->Describe()};
  } else {
    suffix.push_back(0);
    manifest.tokenizer = {"bytes", "", "", 256, std::nullopt, int64_t{0}, false, "bytes (token b = byte b), 0 ends a document"};
  }
  const int64_t vocab = manifest.tokenizer.vocab_size;
  manifest.bytes_per_token = vocab <= 65536 ? 2 : 4;

  // Temporary directory beside the output.
  const fs::path out = fs::absolute(o.out_dir).lexically_normal();
  const fs::path parent = out.parent_path();
  HT_RETURN_IF_ERROR(MakeDirs(parent.string()));
  TempDir tmp{(parent / fmt::format(".{}.tmp-{}", out.filename().string(), ::getpid())).string()};
  (void)RemoveTree(tmp.path);
  HT_RETURN_IF_ERROR(MakeDirs(tmp.path));

  const int workers = o.workers > 0 ? o.workers : std::max(1u, std::thread::hardware_concurrency());
  const int64_t window = 4 * workers + 4;  // batches in flight
  Pipeline p;

  std::thread reader([&] {
    int64_t seq = 0, done_bytes = 0;
    for (size_t i = 0; i < o.inputs.size(); ++i) {
      auto r = OpenDocuments(o.inputs[i], o.input);
      if (!r.ok()) return p.Fail(r.status());
      WorkBatch batch{seq, i, 0, {}};
      size_t batch_bytes = 0;
      auto push = [&]() -> bool {
        batch.bytes_done = done_bytes + (*r)->bytes_read();
        std::unique_lock<std::mutex> l(p.mu);
        p.cv.wait(l, [&] { return p.stop || static_cast<int64_t>(p.work.size()) < window; });
        if (p.stop) return false;
        p.work.push_back(std::move(batch));
        p.cv.notify_all();
        batch = WorkBatch{++seq, i, 0, {}};
        batch_bytes = 0;
        return true;
      };
      while (true) {
        Document d;
        auto more = (*r)->Next(&d);
        if (!more.ok()) return p.Fail(more.status());
        if (!*more) break;
        batch_bytes += d.text.size() + d.ids.size() * 4;
        batch.docs.push_back(std::move(d));
        if ((batch_bytes >= kBatchBytes || batch.docs.size() >= kBatchDocs) && !push()) return;
      }
      if (!batch.docs.empty() && !push()) return;
      manifest.inputs[i].bytes = (*r)->bytes_total();
      done_bytes += (*r)->bytes_total();
      if ((*r)->skipped() > 0) {
        std::fprintf(stderr, "prepare: %s: skipped %lld rows with a null text\n", o.inputs[i].c_str(),
                     static_cast<long long>((*r)->skipped()));
      }
    }
    std::lock_guard<std::mutex> l(p.mu);
    p.reading_done = true;
    p.batches = seq;
    p.cv.notify_all();
  });

  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      std::vector<int32_t> ids;
      std::string repaired;
      while (true) {
        WorkBatch b;
        {
          std::unique_lock<std::mutex> l(p.mu);
          p.cv.wait(l, [&] { return p.stop || !p.work.empty() || p.reading_done; });
          if (p.stop || (p.work.empty() && p.reading_done)) return;
          b = std::move(p.work.front());
          p.work.pop_front();
          p.cv.notify_all();
        }
        TokenBatch t{b.input, b.bytes_done, static_cast<int64_t>(b.docs.size()), 0, {}};
        for (Document& d : b.docs) {
          if (d.json_line > 0) {
            Status s = ExtractJsonText(o.inputs[b.input], o.input.text_field, &d);
            if (!s.ok()) return p.Fail(s);
          }
          if (d.pretokenized) {
            for (int32_t id : d.ids) {
              if (id >= vocab) {
                return p.Fail(DataLoss(fmt::format("{}: token id {} is outside the tokenizer's vocab of {}",
                                                   o.inputs[b.input], id, vocab)));
              }
              t.tokens.push_back(static_cast<uint32_t>(id));
            }
            continue;
          }
          t.tokens.insert(t.tokens.end(), prefix.begin(), prefix.end());
          if (tok) {
            if (!tokenizer::IsValidUtf8(d.text)) t.invalid_utf8 += static_cast<int64_t>(tokenizer::RepairUtf8(d.text, &repaired));
            ids.clear();
            Status s = tok->EncodeTo(d.text, {.add_special = false}, &ids);
            if (!s.ok()) return p.Fail(s);
            t.tokens.insert(t.tokens.end(), ids.begin(), ids.end());
          } else {
            for (unsigned char c : d.text) t.tokens.push_back(c);
          }
          t.tokens.insert(t.tokens.end(), suffix.begin(), suffix.end());
        }
        std::unique_lock<std::mutex> l(p.mu);
        p.cv.wait(l, [&] { return p.stop || b.seq < p.next_to_write + window; });
        if (p.stop) return;
        p.results.emplace(b.seq, std::move(t));
        p.cv.notify_all();
      }
    });
  }

  // Writer: this thread, in input order.
  std::vector<uint32_t> pending;
  auto write_shard = [&](size_t n) -> Status {
    const std::string name = fmt::format("shard_{:05d}.bin", manifest.shards.size());
    std::vector<uint32_t> chunk(pending.begin(), pending.begin() + n);
    HT_RETURN_IF_ERROR(WriteShard((fs::path(tmp.path) / name).string(), chunk, manifest.bytes_per_token,
                                  static_cast<uint32_t>(vocab)));
    manifest.shards.push_back({name, static_cast<int64_t>(n)});
    pending.erase(pending.begin(), pending.begin() + n);
    return Status::Ok();
  };
  const bool tty = ::isatty(2);
  auto last_report = std::chrono::steady_clock::now();
  auto report = [&](int64_t bytes_done, bool final) {
    const auto now = std::chrono::steady_clock::now();
    const double since = std::chrono::duration<double>(now - last_report).count();
    if (!o.progress || (!final && since < (tty ? 0.5 : 10.0))) return;
    last_report = now;
    const double s = std::chrono::duration<double>(now - t0).count();
    const double mbps = bytes_done / 1e6 / std::max(s, 1e-9);
    const double eta = mbps > 0 ? (total_bytes - bytes_done) / 1e6 / mbps : 0;
    std::fprintf(stderr, "%sprepare: %.1f/%.1f MB (%.0f%%), %.1f MB/s, %lld tokens, %lld documents, ETA %s%s",
                 tty ? "\r" : "", bytes_done / 1e6, total_bytes / 1e6,
                 total_bytes > 0 ? 100.0 * bytes_done / total_bytes : 100.0, mbps,
                 static_cast<long long>(manifest.tokens), static_cast<long long>(manifest.documents),
                 Duration(eta).c_str(), tty && !final ? "   " : "\n");
  };
  Status status;
  while (true) {
    TokenBatch t;
    {
      std::unique_lock<std::mutex> l(p.mu);
      p.cv.wait(l, [&] {
        return p.stop || p.results.count(p.next_to_write) || (p.reading_done && p.next_to_write >= p.batches);
      });
      if (p.stop) break;
      auto it = p.results.find(p.next_to_write);
      if (it == p.results.end()) break;  // all written
      t = std::move(it->second);
      p.results.erase(it);
      ++p.next_to_write;
      p.cv.notify_all();
    }
    manifest.documents += t.documents;
    manifest.tokens += static_cast<int64_t>(t.tokens.size());
    manifest.invalid_utf8 += t.invalid_utf8;
    manifest.inputs[t.input].documents += t.documents;
    manifest.inputs[t.input].tokens += static_cast<int64_t>(t.tokens.size());
    pending.insert(pending.end(), t.tokens.begin(), t.tokens.end());
    while (static_cast<int64_t>(pending.size()) >= o.tokens_per_shard && status.ok()) {
      status = write_shard(static_cast<size_t>(o.tokens_per_shard));
    }
    if (!status.ok()) {
      p.Fail(status);
      break;
    }
    report(t.bytes_done, false);
  }
  reader.join();
  for (auto& th : pool) th.join();
  if (!p.error.ok()) return p.error;
  if (!pending.empty()) HT_RETURN_IF_ERROR(write_shard(pending.size()));
  if (manifest.tokens < 2) {
    return InvalidArgument(fmt::format("prepare: the inputs hold {} tokens; nothing to train on", manifest.tokens));
  }
  report(total_bytes, true);
  manifest.created = FormatRfc3339(std::chrono::system_clock::now());
  HT_RETURN_IF_ERROR(WriteFileAtomically((fs::path(tmp.path) / kManifestFile).string(), manifest.ToJson()));

  // Into place: an existing OUT moves aside first and goes only after the
  // new directory is in its place.
  std::error_code ec;
  const bool replace = fs::exists(out, ec);
  const std::string old = (parent / fmt::format(".{}.old-{}", out.filename().string(), ::getpid())).string();
  if (replace) HT_RETURN_IF_ERROR(RenameDurably(out.string(), old));
  Status moved = RenameDurably(tmp.path, out.string());
  if (!moved.ok()) {
    if (replace) (void)RenameDurably(old, out.string());
    return moved;
  }
  tmp.keep = true;
  if (replace) (void)RemoveTree(old);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "prepare: %lld tokens from %lld documents (%zu inputs, %.1f MB) into %s: %zu shards, "
               "%.1f s, %.1f MB/s with %d tokenizer threads\n",
               static_cast<long long>(manifest.tokens), static_cast<long long>(manifest.documents),
               o.inputs.size(), total_bytes / 1e6, o.out_dir.c_str(), manifest.shards.size(), secs,
               total_bytes / 1e6 / std::max(secs, 1e-9), workers);
  if (manifest.invalid_utf8 > 0) {
    std::fprintf(stderr, "prepare: %lld invalid UTF-8 sequences were read as U+FFFD\n",
                 static_cast<long long>(manifest.invalid_utf8));
  }
  return manifest;
}

}  // namespace hypertrain::data::prepare
