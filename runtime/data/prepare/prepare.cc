#include "runtime/data/prepare/prepare.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/dir_lock.h"
#include "core/log.h"
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

// "<prefix><digits>" -> the pid; 0 for any other name.
pid_t PidOfName(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return 0;
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return static_cast<pid_t>(std::stol(digits));
}

// Leftovers of killed runs into `out` (call with its lock held, so no live
// run of this binary owns any): ".<name>.tmp-<pid>" (incomplete output) and
// ".<name>.old-<pid>" (the output a finished replacement moved aside), only
// real directories of exactly those names whose pid is not a live process.
// An interrupted replacement (no `out`, an .old-* there) is left as it is:
// that .old-* is the previous data; the warning says how to restore it.
void RemoveLeftovers(const fs::path& parent, const fs::path& out) {
  const std::string name = out.filename().string();
  const std::string tmp_prefix = "." + name + ".tmp-", old_prefix = "." + name + ".old-";
  std::error_code ec;
  const bool out_exists = fs::exists(out, ec);
  std::vector<fs::path> tmps, olds;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string n = e.path().filename().string();
    std::error_code sec;
    if (!fs::is_directory(e.symlink_status(sec))) continue;
    for (auto [prefix, list] : {std::pair{&tmp_prefix, &tmps}, std::pair{&old_prefix, &olds}}) {
      const pid_t pid = PidOfName(n, *prefix);
      if (pid > 0 && pid != ::getpid() && !(::kill(pid, 0) == 0 || errno == EPERM)) list->push_back(e.path());
    }
  }
  if (!out_exists && !olds.empty()) {
    spdlog::warn("prepare: {} is missing and {} holds the data it had before a replacement was interrupted; "
                 "left as they are (restore it with mv {} {})",
                 out.string(), olds.front().string(), olds.front().string(), out.string());
    return;
  }
  for (const auto* list : {&tmps, &olds}) {
    for (const fs::path& p : *list) {
      spdlog::info("prepare: removing {}, left by a run that was killed", p.string());
      (void)RemoveTree(p.string());
    }
  }
}

// One run of prepare: setup, then the reader / tokenizer threads / writer,
// then the move into place.
class Run {
 public:
  explicit Run(const PrepareOptions& o) : o_(o), t0_(std::chrono::steady_clock::now()) {}
  StatusOr<DataManifest> Execute();

 private:
  Status Setup();
  Status LoadTokenizer();
  void Reader();
  void Worker();
  Status Tokenize(WorkBatch& b, TokenBatch* t, std::vector<int32_t>* ids) const;
  Status Writer();
  Status WriteShard(size_t n);
  void Report(int64_t bytes_done, bool final);
  Status Commit();

  const PrepareOptions& o_;
  const std::chrono::steady_clock::time_point t0_;
  DataManifest manifest_;
  int64_t total_bytes_ = 0;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<uint32_t> prefix_, suffix_;  // around each document
  int64_t vocab_ = 0;
  int workers_ = 1;
  int64_t window_ = 8;  // batches in flight
  fs::path out_, parent_;
  DirLock lock_;  // ".<name>.lock" beside the output; released after tmp_ goes
  TempDir tmp_;
  Pipeline p_;
  std::vector<uint32_t> pending_;  // tokens of the shard being filled
  std::chrono::steady_clock::time_point last_report_ = t0_;
};

Status Run::Setup() {
  if (o_.inputs.empty()) return InvalidArgument("prepare: no inputs given");
  if (o_.out_dir.empty()) return InvalidArgument("prepare: --out is required");
  if (o_.tokens_per_shard < 2) {
    return InvalidArgument(fmt::format("prepare: --tokens-per-shard {} must be >= 2", o_.tokens_per_shard));
  }
  HT_RETURN_IF_ERROR(CheckOutDir(o_));
  // Every input must exist and be readable before any work starts.
  for (const std::string& in : o_.inputs) {
    HT_ASSIGN_OR_RETURN(int64_t bytes, InputBytes(in, o_.input));
    HT_ASSIGN_OR_RETURN(auto probe, OpenDocuments(in, o_.input));
    manifest_.inputs.push_back({in, probe->format(), bytes, 0, 0});
    total_bytes_ += bytes;
  }
  HT_RETURN_IF_ERROR(LoadTokenizer());
  vocab_ = manifest_.tokenizer.vocab_size;
  manifest_.bytes_per_token = vocab_ <= 65536 ? 2 : 4;
  workers_ = o_.workers > 0 ? o_.workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  window_ = 4 * workers_ + 4;
  // The temporary directory beside the output.
  out_ = fs::absolute(o_.out_dir).lexically_normal();
  parent_ = out_.parent_path();
  HT_RETURN_IF_ERROR(MakeDirs(parent_.string()));
  // One run per output: a second one is refused naming the first (host, pid).
  HT_ASSIGN_OR_RETURN(lock_, DirLock::Acquire((parent_ / ("." + out_.filename().string() + ".lock")).string(),
                                              "prepare --out " + o_.out_dir));
  HT_RETURN_IF_ERROR(CheckOutDir(o_));  // again, now that no other run can fill it
  RemoveLeftovers(parent_, out_);
  tmp_.path = (parent_ / fmt::format(".{}.tmp-{}", out_.filename().string(), ::getpid())).string();
  (void)RemoveTree(tmp_.path);
  return MakeDirs(tmp_.path);
}

Status Run::LoadTokenizer() {
  if (o_.tokenizer_dir.empty()) {
    suffix_.push_back(0);
    manifest_.tokenizer = {"bytes", "", "", 256, std::nullopt, int64_t{0}, false,
                           "bytes (token b = byte b), 0 ends a document"};
    return Status::Ok();
  }
  HT_ASSIGN_OR_RETURN(tok_, Tokenizer::FromDir(o_.tokenizer_dir));
  if (!tok_->eos_id()) {
    return InvalidArgument(fmt::format("tokenizer {} has no eos_token (tokenizer_config.json) to end documents with",
                                       o_.tokenizer_dir));
  }
  const bool bos = o_.bos == BosPolicy::kAlways || (o_.bos == BosPolicy::kAuto && tok_->add_bos());
  if (bos && !tok_->bos_id()) return InvalidArgument(fmt::format("tokenizer {} has no bos_token", o_.tokenizer_dir));
  if (bos) prefix_.push_back(static_cast<uint32_t>(*tok_->bos_id()));
  suffix_.push_back(static_cast<uint32_t>(*tok_->eos_id()));
  manifest_.tokenizer = {"hf", fs::absolute(o_.tokenizer_dir).string(), tok_->sha256(), tok_->vocab_size(),
                         tok_->bos_id(), tok_->eos_id(), bos, tok_->Describe()};
  return Status::Ok();
}

// Cuts the inputs, in order, into batches of documents.
void Run::Reader() {
  int64_t seq = 0, done_bytes = 0;
  for (size_t i = 0; i < o_.inputs.size(); ++i) {
    auto r = OpenDocuments(o_.inputs[i], o_.input);
    if (!r.ok()) return p_.Fail(r.status());
    WorkBatch batch{seq, i, 0, {}};
    size_t batch_bytes = 0;
    auto push = [&]() -> bool {
      batch.bytes_done = done_bytes + (*r)->bytes_read();
      std::unique_lock<std::mutex> l(p_.mu);
      p_.cv.wait(l, [&] { return p_.stop || static_cast<int64_t>(p_.work.size()) < window_; });
      if (p_.stop) return false;
      p_.work.push_back(std::move(batch));
      p_.cv.notify_all();
      batch = WorkBatch{++seq, i, 0, {}};
      batch_bytes = 0;
      return true;
    };
    while (true) {
      Document d;
      auto more = (*r)->Next(&d);
      if (!more.ok()) return p_.Fail(more.status());
      if (!*more) break;
      batch_bytes += d.text.size() + d.ids.size() * 4;
      batch.docs.push_back(std::move(d));
      if ((batch_bytes >= kBatchBytes || batch.docs.size() >= kBatchDocs) && !push()) return;
    }
    if (!batch.docs.empty() && !push()) return;
    manifest_.inputs[i].bytes = (*r)->bytes_total();
    done_bytes += (*r)->bytes_total();
    if ((*r)->skipped() > 0) {
      spdlog::warn("prepare: {}: skipped {} rows with a null text", o_.inputs[i], (*r)->skipped());
    }
  }
  std::lock_guard<std::mutex> l(p_.mu);
  p_.reading_done = true;
  p_.batches = seq;
  p_.cv.notify_all();
}

// [BOS] ids EOS per document; pre-tokenized rows as they are.
Status Run::Tokenize(WorkBatch& b, TokenBatch* t, std::vector<int32_t>* ids) const {
  std::string repaired;
  for (Document& d : b.docs) {
    if (d.json_line > 0) HT_RETURN_IF_ERROR(ExtractJsonText(o_.inputs[b.input], o_.input.text_field, &d));
    if (d.pretokenized) {
      for (int32_t id : d.ids) {
        if (id >= vocab_) {
          return DataLoss(fmt::format("{}: token id {} is outside the tokenizer's vocab of {}", o_.inputs[b.input],
                                      id, vocab_));
        }
        t->tokens.push_back(static_cast<uint32_t>(id));
      }
      continue;
    }
    t->tokens.insert(t->tokens.end(), prefix_.begin(), prefix_.end());
    if (tok_) {
      if (!tokenizer::IsValidUtf8(d.text)) {
        t->invalid_utf8 += static_cast<int64_t>(tokenizer::RepairUtf8(d.text, &repaired));
      }
      ids->clear();
      HT_RETURN_IF_ERROR(tok_->EncodeTo(d.text, {.add_special = false}, ids));
      t->tokens.insert(t->tokens.end(), ids->begin(), ids->end());
    } else {
      for (unsigned char c : d.text) t->tokens.push_back(c);
    }
    t->tokens.insert(t->tokens.end(), suffix_.begin(), suffix_.end());
  }
  return Status::Ok();
}

void Run::Worker() {
  std::vector<int32_t> ids;
  while (true) {
    WorkBatch b;
    {
      std::unique_lock<std::mutex> l(p_.mu);
      p_.cv.wait(l, [&] { return p_.stop || !p_.work.empty() || p_.reading_done; });
      if (p_.stop || (p_.work.empty() && p_.reading_done)) return;
      b = std::move(p_.work.front());
      p_.work.pop_front();
      p_.cv.notify_all();
    }
    TokenBatch t{b.input, b.bytes_done, static_cast<int64_t>(b.docs.size()), 0, {}};
    Status s = Tokenize(b, &t, &ids);
    if (!s.ok()) return p_.Fail(s);
    std::unique_lock<std::mutex> l(p_.mu);
    p_.cv.wait(l, [&] { return p_.stop || b.seq < p_.next_to_write + window_; });
    if (p_.stop) return;
    p_.results.emplace(b.seq, std::move(t));
    p_.cv.notify_all();
  }
}

Status Run::WriteShard(size_t n) {
  const std::string name = fmt::format("shard_{:05d}.bin", manifest_.shards.size());
  std::vector<uint32_t> chunk(pending_.begin(), pending_.begin() + n);
  HT_RETURN_IF_ERROR(data::WriteShard((fs::path(tmp_.path) / name).string(), chunk, manifest_.bytes_per_token,
                                      static_cast<uint32_t>(vocab_)));
  manifest_.shards.push_back({name, static_cast<int64_t>(n)});
  pending_.erase(pending_.begin(), pending_.begin() + n);
  return Status::Ok();
}

void Run::Report(int64_t bytes_done, bool final) {
  // A JSON log gets the progress as log lines (no carriage returns).
  static const bool stderr_tty = ::isatty(2);
  const bool json = log::IsJson();
  const bool tty = !json && stderr_tty;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_report_).count();
  if (!o_.progress || (!final && since < (tty ? 0.5 : 10.0))) return;
  last_report_ = now;
  const double s = std::chrono::duration<double>(now - t0_).count();
  const double mbps = bytes_done / 1e6 / std::max(s, 1e-9);
  const double eta = mbps > 0 ? (total_bytes_ - bytes_done) / 1e6 / mbps : 0;
  const std::string text = fmt::format("prepare: {:.1f}/{:.1f} MB ({:.0f}%), {:.1f} MB/s, {} tokens, {} documents, ETA {}",
                                       bytes_done / 1e6, total_bytes_ / 1e6,
                                       total_bytes_ > 0 ? 100.0 * bytes_done / total_bytes_ : 100.0, mbps,
                                       manifest_.tokens, manifest_.documents, Duration(eta));
  if (json) {
    spdlog::info("{}", text);
    return;
  }
  std::fprintf(stderr, "%s%s%s", tty ? "\r" : "", text.c_str(), tty && !final ? "   " : "\n");
}

// Takes token batches in input order into shards until all are written or
// a thread failed.
Status Run::Writer() {
  while (true) {
    TokenBatch t;
    {
      std::unique_lock<std::mutex> l(p_.mu);
      p_.cv.wait(l, [&] {
        return p_.stop || p_.results.count(p_.next_to_write) || (p_.reading_done && p_.next_to_write >= p_.batches);
      });
      if (p_.stop) return Status::Ok();
      auto it = p_.results.find(p_.next_to_write);
      if (it == p_.results.end()) return Status::Ok();  // all written
      t = std::move(it->second);
      p_.results.erase(it);
      ++p_.next_to_write;
      p_.cv.notify_all();
    }
    manifest_.documents += t.documents;
    manifest_.tokens += static_cast<int64_t>(t.tokens.size());
    manifest_.invalid_utf8 += t.invalid_utf8;
    manifest_.inputs[t.input].documents += t.documents;
    manifest_.inputs[t.input].tokens += static_cast<int64_t>(t.tokens.size());
    pending_.insert(pending_.end(), t.tokens.begin(), t.tokens.end());
    while (static_cast<int64_t>(pending_.size()) >= o_.tokens_per_shard) {
      HT_RETURN_IF_ERROR(WriteShard(static_cast<size_t>(o_.tokens_per_shard)));
    }
    Report(t.bytes_done, false);
  }
}

// manifest.json, then into place: an existing output moves aside first and
// goes only after the new directory is in its place.
Status Run::Commit() {
  if (!pending_.empty()) HT_RETURN_IF_ERROR(WriteShard(pending_.size()));
  if (manifest_.tokens < 2) {
    return InvalidArgument(fmt::format("prepare: the inputs hold {} tokens; nothing to train on", manifest_.tokens));
  }
  Report(total_bytes_, true);
  manifest_.created = FormatRfc3339(std::chrono::system_clock::now());
  HT_RETURN_IF_ERROR(WriteFileAtomically((fs::path(tmp_.path) / kManifestFile).string(), manifest_.ToJson()));
  std::error_code ec;
  const bool replace = fs::exists(out_, ec);
  if (replace && !o_.overwrite) HT_RETURN_IF_ERROR(CheckOutDir(o_));  // filled by a run that took no lock
  const std::string old = (parent_ / fmt::format(".{}.old-{}", out_.filename().string(), ::getpid())).string();
  if (replace) HT_RETURN_IF_ERROR(RenameDurably(out_.string(), old));
  Status moved = RenameDurably(tmp_.path, out_.string());
  if (!moved.ok()) {
    if (replace) (void)RenameDurably(old, out_.string());
    return moved;
  }
  tmp_.keep = true;
  if (replace) (void)RemoveTree(old);
  return Status::Ok();
}

StatusOr<DataManifest> Run::Execute() {
  HT_RETURN_IF_ERROR(Setup());
  std::thread reader([this] { Reader(); });
  std::vector<std::thread> pool;
  for (int w = 0; w < workers_; ++w) pool.emplace_back([this] { Worker(); });
  Status written = Writer();
  if (!written.ok()) p_.Fail(written);
  reader.join();
  for (auto& th : pool) th.join();
  if (!p_.error.ok()) return p_.error;
  HT_RETURN_IF_ERROR(Commit());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  spdlog::info("prepare: {} tokens from {} documents ({} inputs, {:.1f} MB) into {}: {} shards, {:.1f} s, "
               "{:.1f} MB/s with {} tokenizer threads",
               manifest_.tokens, manifest_.documents, o_.inputs.size(), total_bytes_ / 1e6, o_.out_dir,
               manifest_.shards.size(), secs, total_bytes_ / 1e6 / std::max(secs, 1e-9), workers_);
  if (manifest_.invalid_utf8 > 0) {
    spdlog::warn("prepare: {} invalid UTF-8 sequences were read as U+FFFD", manifest_.invalid_utf8);
  }
  return manifest_;
}

}  // namespace

StatusOr<DataManifest> Prepare(const PrepareOptions& options) {
  Run run(options);
  return run.Execute();
}

}  // namespace hypertrain::data::prepare
