#include "runtime/parallel/gloo_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/env_lookup.h"
#include "runtime/parallel/bf16.h"
#include "runtime/trace/recorder.h"
#include "runtime/parallel/groups.h"

namespace hypertrain::parallel {

size_t DTypeSize(DType d) {
  switch (d) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kU8: return 1;
  }
  return 1;
}
const char* DTypeName(DType d) {
  switch (d) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    case DType::kU8: return "u8";
  }
  return "?";
}

namespace {

// gloo's rendezvous store interface over our TCP store (keys namespaced per group).
// Every wait ends by `deadline` (Gloo's own is its op timeout, 30 min and
// more); a wait that times out names the world ranks whose keys are missing
// (Gloo's full-mesh keys are the group ranks).
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(launch::TcpStoreClient* store, std::string prefix, std::chrono::milliseconds timeout,
               std::chrono::steady_clock::time_point deadline, const std::vector<int>* ranks,
               int local_world_size)
      : store_(store),
        prefix_(std::move(prefix)),
        timeout_(timeout),
        deadline_(deadline),
        ranks_(ranks),
        local_world_size_(local_world_size) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_->Set(prefix_ + key, std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = store_->Get(prefix_ + key, Bound(timeout_));
    Check(v.status());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    const Status s = store_->Wait(full, Bound(timeout));
    if (s.code() != StatusCode::kDeadlineExceeded || ranks_ == nullptr) return Check(s);
    std::vector<int> missing;
    for (const auto& k : keys) {
      StatusOr<bool> there = store_->Check(prefix_ + k);
      const int g = std::atoi(k.c_str());
      if ((!there.ok() || !*there) && g >= 0 && g < static_cast<int>(ranks_->size())) {
        missing.push_back((*ranks_)[g]);
      }
    }
    throw std::runtime_error("by the start-up deadline (HT_RENDEZVOUS_TIMEOUT_S) " +
                             DescribeMissingRanks(missing, local_world_size_) +
                             " did not join, via the store at " + store_->address());
  }

 private:
  std::chrono::milliseconds Bound(std::chrono::milliseconds t) const {
    if (deadline_ == std::chrono::steady_clock::time_point{}) return t;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline_ - std::chrono::steady_clock::now());
    return std::max(std::chrono::milliseconds(0), std::min(t, left));
  }
  static void Check(const Status& s) {
    if (!s.ok()) throw std::runtime_error(s.ToString());
  }
  launch::TcpStoreClient* store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point deadline_;
  const std::vector<int>* ranks_;
  int local_world_size_;
};

void SumF32(void* c, const void* a, const void* b, size_t n) {
  auto* o = static_cast<float*>(c);
  auto* x = static_cast<const float*>(a);
  auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

void MaxF32(void* c, const void* a, const void* b, size_t n) {
  auto* o = static_cast<float*>(c);
  auto* x = static_cast<const float*>(a);
  auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] > y[i] ? x[i] : y[i];
}

// Reductions take fp32 / bf16 (kMax: fp32 only); bytes are only moved.
Status CheckReduction(const char* what, DType dtype, ReduceOp op, DType reduce_dtype) {
  if (dtype == DType::kU8 || reduce_dtype == DType::kU8) {
    return InvalidArgument(std::string(what) + ": u8 carries bytes and cannot be reduced");
  }
  if (op == ReduceOp::kMax && (dtype != DType::kF32 || reduce_dtype != DType::kF32)) {
    return InvalidArgument(std::string(what) + ": max is supported for fp32 only");
  }
  return Status::Ok();
}

void SumBf16(void* c, const void* a, const void* b, size_t n) {
  Bf16Add(static_cast<uint16_t*>(c), static_cast<const uint16_t*>(a),
          static_cast<const uint16_t*>(b), n);
}

// Old-style gloo algorithms take typed in-place reduction functions.
void SumBf16InPlace(uint16_t* x, const uint16_t* y, size_t n) { Bf16Add(x, x, y, n); }
const gloo::ReductionFunction<uint16_t>* Bf16SumFn() {
  static const auto* fn = new gloo::ReductionFunction<uint16_t>(gloo::SUM, &SumBf16InPlace);
  return fn;
}

// Converts n elements between element types (same type: copy).
void Convert(const void* src, DType from, void* dst, DType to, size_t n) {
  if (from == to) {
    std::memmove(dst, src, n * DTypeSize(from));
  } else if (from == DType::kF32) {
    auto* s = static_cast<const float*>(src);
    auto* d = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = FloatToBf16(s[i]);
  } else {
    auto* s = static_cast<const uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = Bf16ToFloat(s[i]);
  }
}

void Scale(void* buf, DType d, size_t n, float factor) {
  if (d == DType::kF32) {
    auto* p = static_cast<float*>(buf);
    for (size_t i = 0; i < n; ++i) p[i] *= factor;
  } else {
    auto* p = static_cast<uint16_t*>(buf);
    for (size_t i = 0; i < n; ++i) p[i] = FloatToBf16(Bf16ToFloat(p[i]) * factor);
  }
}

Status FromException(const std::string& what, const std::exception& e) {
  const std::string msg = what + ": " + e.what();
  if (std::strstr(e.what(), "Timed out") || std::strstr(e.what(), "timed out")) {
    return DeadlineExceeded(msg);
  }
  return Unavailable(msg);
}

std::string HostName() {
  char host[256] = {};
  return ::gethostname(host, sizeof(host) - 1) == 0 ? host : "";
}

// The store key naming the rank behind `address`, one end of a connection of
// group `group`; its value is "<world rank> <host name>".
std::string PeerKey(const std::string& group, const std::string& address) {
  return "gloo/" + group + "/peer/" + address;
}

class FutureWork final : public Work {
 public:
  explicit FutureWork(std::shared_future<Status> f) : f_(std::move(f)) {}
  Status Wait() override { return f_.get(); }

 private:
  std::shared_future<Status> f_;
};

class GlooGroup final : public ProcessGroup {
 public:
  GlooGroup(std::string name, std::shared_ptr<gloo::Context> ctx, CollectiveWatchdog* watchdog,
            launch::TcpStoreClient* store, int local_world_size)
      : name_(std::move(name)),
        ctx_(std::move(ctx)),
        watchdog_(watchdog),
        store_(store),
        local_world_size_(local_world_size) {
    worker_ = std::thread([this] { Loop(); });
  }

  ~GlooGroup() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  const std::string& name() const override { return name_; }
  const char* backend() const override { return "gloo"; }

  std::unique_ptr<Work> AllGather(const void* shard, void* full, size_t count, DType dtype) override {
    return Enqueue(Describe("all_gather", count, dtype), {"all_gather", count * size(), dtype}, [=, this]() {
      const size_t bytes = count * DTypeSize(dtype);
      char* out = static_cast<char*>(full);
      if (size() == 1) {
        std::memmove(out, shard, bytes);
        return;
      }
      // gloo copies the input into place itself; give it a private copy
      // because the input may alias the output.
      std::vector<char> in(static_cast<const char*>(shard), static_cast<const char*>(shard) + bytes);
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput(in.data(), bytes);
      opts.setOutput(out, bytes * size());
      opts.setTag(NextTag());
      gloo::allgather(opts);
    });
  }

  std::unique_ptr<Work> ReduceScatter(const void* full, void* shard, size_t count, DType dtype,
                                      ReduceOp op, DType reduce_dtype) override {
    Status bad = CheckReduction("reduce_scatter", dtype, op, reduce_dtype);
    if (bad.ok() && op == ReduceOp::kMax) bad = InvalidArgument("reduce_scatter: max is not supported");
    if (!bad.ok()) return std::make_unique<DoneWork>(bad);
    return Enqueue(Describe("reduce_scatter", count, dtype, reduce_dtype), {"reduce_scatter", count * size(), dtype},
                   [=, this]() {
      const size_t total = count * size();
      // The algorithm reduces in place; work on a copy in the reduce dtype.
      std::vector<char> buf(total * DTypeSize(reduce_dtype));
      Convert(full, dtype, buf.data(), reduce_dtype, total);
      if (size() > 1) {
        const std::vector<int> recv(size(), static_cast<int>(count));
        if (reduce_dtype == DType::kF32) {
          gloo::ReduceScatterHalvingDoubling<float> algo(
              ctx_, {reinterpret_cast<float*>(buf.data())}, static_cast<int>(total), recv);
          algo.run();
        } else {
          gloo::ReduceScatterHalvingDoubling<uint16_t> algo(
              ctx_, {reinterpret_cast<uint16_t*>(buf.data())}, static_cast<int>(total), recv,
              Bf16SumFn());
          algo.run();
        }
      }
      // ReduceScatterHalvingDoubling leaves this rank's block at the start of
      // the buffer.
      Convert(buf.data(), reduce_dtype, shard, dtype, count);
      if (op == ReduceOp::kAvg) Scale(shard, dtype, count, 1.0f / size());
    });
  }

  std::unique_ptr<Work> AllReduce(void* buf, size_t count, DType dtype, ReduceOp op,
                                  DType reduce_dtype) override {
    const Status bad = CheckReduction("all_reduce", dtype, op, reduce_dtype);
    if (!bad.ok()) return std::make_unique<DoneWork>(bad);
    return Enqueue(Describe("all_reduce", count, dtype, reduce_dtype), {"all_reduce", count, dtype}, [=, this]() {
      std::vector<char> tmp;
      void* work = buf;
      if (reduce_dtype != dtype) {
        tmp.resize(count * DTypeSize(reduce_dtype));
        Convert(buf, dtype, tmp.data(), reduce_dtype, count);
        work = tmp.data();
      }
      if (size() > 1 && count > 0) {
        gloo::AllreduceOptions opts(ctx_);
        if (reduce_dtype == DType::kF32) {
          opts.setOutput(static_cast<float*>(work), count);
          opts.setReduceFunction(op == ReduceOp::kMax ? &MaxF32 : &SumF32);
        } else {
          opts.setOutput(static_cast<uint16_t*>(work), count);
          opts.setReduceFunction(&SumBf16);
        }
        opts.setTag(NextTag());
        gloo::allreduce(opts);
      }
      if (work != buf) Convert(work, reduce_dtype, buf, dtype, count);
      if (op == ReduceOp::kAvg) Scale(buf, dtype, count, 1.0f / size());
    });
  }

  std::unique_ptr<Work> Broadcast(void* buf, size_t count, DType dtype, int root) override {
    if (root < 0 || root >= size()) {
      return std::make_unique<DoneWork>(InvalidArgument(
          "broadcast root " + std::to_string(root) + " outside group '" + name_ + "' of " +
          std::to_string(size())));
    }
    return Enqueue(Describe("broadcast", count, dtype), {"broadcast", count, dtype}, [=, this]() {
      if (size() == 1 || count == 0) return;
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(static_cast<char*>(buf), count * DTypeSize(dtype));
      opts.setRoot(root);
      opts.setTag(NextTag());
      gloo::broadcast(opts);
    });
  }

  Status Barrier() override {
    return Enqueue(name_ + " barrier", {"barrier", 0, DType::kF32}, [this]() {
             if (size() == 1) return;
             gloo::BarrierOptions opts(ctx_);
             opts.setTag(NextTag());
             gloo::barrier(opts);
           })
        ->Wait();
  }

 void SetTrace(trace::Recorder* recorder) override {
    std::lock_guard<std::mutex> l(mu_);
    trace_ = recorder;
    if (trace_ != nullptr) track_ = trace_->Track("gloo " + name_);
  }

 private:
  // What a trace says about a collective: its op and the elements it moves
  // (the full buffer: all_gather's output, reduce_scatter's input).
  struct TraceInfo {
    const char* op;
    size_t count;
    DType dtype;
  };
  struct Task {
    std::string what;
    std::function<void()> fn;
    std::promise<Status> done;
    TraceInfo info{"?", 0, DType::kF32};
    uint64_t seq = 0;
  };

  std::string Describe(const char* op, size_t count, DType dtype) {
    return std::string(op) + " on group '" + name_ + "' (gloo, rank " + std::to_string(rank()) +
           " of " + std::to_string(size()) + ", " + std::to_string(count) + " x " +
           DTypeName(dtype) + ")";
  }
  std::string Describe(const char* op, size_t count, DType dtype, DType reduce) {
    return Describe(op, count, dtype) + " reduce " + DTypeName(reduce);
  }

  uint32_t NextTag() { return tag_++ & 0x00ffffffu; }

  // Who is at the far end of the connection a Gloo error names (by its
  // address only): the rank each peer registered for that address when the
  // group connected (PeerKey). "" when no address is named.
  std::string NameFailedPeer(const std::string& error) {
    const std::string address = TransportPeerAddress(error);
    if (address.empty()) return "";
    auto who = store_ != nullptr ? store_->Get(PeerKey(name_, address), std::chrono::seconds(2))
                                 : StatusOr<std::string>(Unavailable("no store"));
    if (who.status().code() == StatusCode::kDeadlineExceeded) {
      return "peer " + address + " (no rank registered that address)";
    }
    if (!who.ok()) {
      return "peer " + address + "; its rank is unknown: the store at " +
             (store_ != nullptr ? store_->address() : std::string("?")) +
             " does not answer (rank 0 serves it)";
    }
    // "<world rank> <host>" (see PeerKey).
    const size_t space = who->find(' ');
    const std::string host = space == std::string::npos ? "" : who->substr(space + 1);
    return DescribeFailedPeer(error, {{address, std::atoi(who->c_str()), host}}, local_world_size_);
  }

  std::unique_ptr<Work> Enqueue(std::string what, TraceInfo info, std::function<void()> fn) {
    Task t{std::move(what), std::move(fn), {}, info, 0};
    auto fut = t.done.get_future().share();
    {
      std::lock_guard<std::mutex> l(mu_);
      t.seq = seq_++;
      queue_.push_back(std::move(t));
    }
    cv_.notify_one();
    return std::make_unique<FutureWork>(std::move(fut));
  }

  void Loop() {
    for (;;) {
      Task t;
      trace::Recorder* tr = nullptr;
      int track = 0;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop with nothing left
        t = std::move(queue_.front());
        queue_.pop_front();
        tr = trace_ != nullptr && trace_->active() ? trace_ : nullptr;
        track = track_;
      }
      const double begin = tr != nullptr ? tr->NowUs() : 0.0;
      Status s;
      if (!first_failure_.empty()) {
        s = Unavailable(t.what + ": not run, an earlier collective of this group failed: " + first_failure_);
      } else {
        try {
          WatchdogScope scope(watchdog_, t.what);
          t.fn();
        } catch (const std::exception& e) {
          s = FromException(t.what, e);
          // Name the peer behind a failed connection (Gloo names only its
          // address): typically a peer rank that exited or a lost node.
          if (std::string peer = NameFailedPeer(e.what()); !peer.empty()) {
            s = Status(s.code(), s.message() + "; " + peer);
          }
          // The group's streams are out of step now; every later collective
          // repeats the cause.
          first_failure_ = s.message();
        }
      }
      if (tr != nullptr) {
        tr->Complete(track, t.info.op, "collective", begin, tr->NowUs(),
                     {{"group", name_},
                      {"seq", t.seq},
                      {"count", t.info.count},
                      {"dtype", DTypeName(t.info.dtype)},
                      {"bytes", t.info.count * DTypeSize(t.info.dtype)},
                      {"ranks", size()},
                      {"ok", s.ok()}});
      }
      t.done.set_value(std::move(s));
    }
  }

  std::string name_;
  std::shared_ptr<gloo::Context> ctx_;
  CollectiveWatchdog* watchdog_;
  launch::TcpStoreClient* const store_;
  const int local_world_size_;
  uint32_t tag_ = 1;
  uint64_t seq_ = 0;  // collectives issued (mu_)
  trace::Recorder* trace_ = nullptr;  // mu_
  int track_ = 0;
  std::string first_failure_;  // worker thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace

StatusOr<std::shared_ptr<gloo::transport::Device>> CreateGlooDevice(const GlooOptions& options) {
  gloo::transport::tcp::attr attr;
  std::string iface = options.iface;
  if (options.hostname.empty() && iface.empty()) {
    const char* e = ProcessEnvironment()("GLOO_SOCKET_IFNAME");
    if (e != nullptr && *e != '\0') iface = e;
  }
  if (!options.hostname.empty()) {
    attr.hostname = options.hostname;
  } else if (!iface.empty()) {
    attr.iface = iface;
  } else {
    attr.hostname = HostName();
    if (attr.hostname.empty()) return Internal("gethostname failed");
  }
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return Unavailable(std::string("cannot create the Gloo TCP device on ") +
                       (attr.iface.empty() ? "host '" + attr.hostname + "'" : "interface '" + attr.iface + "'") +
                       ": " + e.what());
  }
}

StatusOr<std::unique_ptr<ProcessGroup>> CreateGlooGroup(
    const std::string& name, const std::vector<int>& ranks, int world_rank, launch::TcpStoreClient* store,
    std::shared_ptr<gloo::transport::Device> device, const GlooOptions& options,
    CollectiveWatchdog* watchdog) {
  int group_rank = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == world_rank) group_rank = static_cast<int>(i);
  }
  if (group_rank < 0) {
    return InvalidArgument("rank " + std::to_string(world_rank) + " is not a member of group '" + name + "'");
  }
  auto ctx = std::make_shared<gloo::rendezvous::Context>(group_rank, static_cast<int>(ranks.size()));
  ctx->setTimeout(options.timeout);
  if (ranks.size() > 1) {
    StoreAdapter adapter(store, "gloo/" + name + "/", options.rendezvous_timeout,
                         options.connect_deadline, &ranks, options.local_world_size);
    try {
      ctx->connectFullMesh(adapter, device);
    } catch (const std::exception& e) {
      return Unavailable("connecting Gloo group '" + name + "' (" + std::to_string(ranks.size()) +
                         " ranks) as group rank " + std::to_string(group_rank) + ": " + e.what());
    }
  }
  // Gloo names a failed connection by the far end's address (each pair has
  // its own port): register who this rank is for each of its ends, so that a
  // peer whose connection to it fails can name it.
  const std::string host = HostName();
  for (int g = 0; g < static_cast<int>(ranks.size()); ++g) {
    if (g == group_rank) continue;
    const std::string address = ctx->getPair(g)->address().str();
    if (Status s = store->Set(PeerKey(name, address), std::to_string(world_rank) + " " + host); !s.ok()) {
      return Unavailable("registering Gloo group '" + name + "' connection " + address + " in the store: " +
                         s.ToString());
    }
  }
  return std::unique_ptr<ProcessGroup>(
      new GlooGroup(name, std::move(ctx), watchdog, store, options.local_world_size));
}

}  // namespace hypertrain::parallel
