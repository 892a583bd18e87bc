#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "core/atomic_file.h"
#include "runtime/trace/gzip.h"
#include "runtime/trace/merge.h"
#include "runtime/trace/recorder.h"
#include "runtime/trace/tracing_hooks.h"
#include "runtime/backends/cpu/backend.h"

namespace hypertrain::trace {
namespace {

using nlohmann::json;

std::string TmpDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name + "-" + std::to_string(::getpid());
}

int CountEvents(const json& doc, const std::string& ph, const std::string& name = "") {
  int n = 0;
  for (const json& e : doc["traceEvents"]) {
    n += e["ph"] == ph && (name.empty() || e["name"] == name);
  }
  return n;
}

TEST(RecorderTest, RecordsOnlyInsideTheWindow) {
  Recorder r({0, 1, 0, "h", ""});
  { Span s(&r, Recorder::kHostTrack, "before"); }
  r.Start();
  {
    Span step(&r, Recorder::kHostTrack, "step");
    step.Arg("step", 3);
    { Span inner(&r, Recorder::kHostTrack, "data"); }
  }
  r.Counter("memory", r.NowUs(), {{"rss_MiB", 12.5}});
  r.Stop();
  { Span s(&r, Recorder::kHostTrack, "after"); }
  const json doc = r.ToJson();
  ASSERT_TRUE(Validate(doc).ok()) << Validate(doc).ToString();
  EXPECT_EQ(CountEvents(doc, "X"), 2);
  EXPECT_EQ(CountEvents(doc, "X", "before") + CountEvents(doc, "X", "after"), 0);
  EXPECT_EQ(CountEvents(doc, "C", "memory"), 1);
  for (const json& e : doc["traceEvents"]) {
    if (e["name"] == "step") {
      EXPECT_EQ(e["args"]["step"], 3);
    }
  }
  EXPECT_EQ(doc["otherData"]["hypertrain"]["rank"], 0);
}

TEST(RecorderTest, NullRecorderSpansCostNothing) {
  Span s(nullptr, 1, "x");
  EXPECT_FALSE(s.on());
  s.Arg("bytes", 5);  // no-op
}

TEST(RecorderTest, TracksAreNamedAndStableAcrossThreads) {
  Recorder r({2, 4, 1, "node-1", ""});
  r.Start();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r, t] {
      const int track = r.Track("worker " + std::to_string(t % 2));
      for (int i = 0; i < 100; ++i) {
        // Sequential spans on a track: each ends before the next begins.
        const double b = r.NowUs();
        r.Complete(track, "op", "collective", b, b, {{"bytes", i}});
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(r.Track("worker 0"), r.Track("worker 0"));
  EXPECT_NE(r.Track("worker 0"), r.Track("worker 1"));
  EXPECT_EQ(r.event_count(), 400);
  const json doc = r.ToJson();
  EXPECT_TRUE(Validate(doc).ok()) << Validate(doc).ToString();
  int named = 0;
  for (const json& e : doc["traceEvents"]) {
    if (e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "rank 2 (node 1, node-1)");
    }
    named += e["name"] == "thread_name";
  }
  EXPECT_EQ(named, 3);  // host, worker 0, worker 1
}

TEST(RecorderTest, BoundedAndWrittenAtomicallyAsGzip) {
  RecorderOptions o{1, 2, 0, "h", TmpDir("rec")};
  o.max_events = 10;
  Recorder r(o);
  r.Start();
  for (int i = 0; i < 25; ++i) r.Instant(Recorder::kHostTrack, "tick", "host", r.NowUs());
  EXPECT_EQ(r.event_count(), 10);
  EXPECT_EQ(r.dropped(), 15);
  auto path = r.Write();
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*path, o.dir + "/trace-rank1.json.gz");
  auto raw = ReadFileToString(*path);
  ASSERT_TRUE(raw.ok());
  EXPECT_TRUE(IsGzip(*raw));
  auto doc = ReadTrace(*path);
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ((*doc)["otherData"]["hypertrain"]["dropped"], 15);
  EXPECT_TRUE(Validate(*doc).ok());
  auto files = RankFiles(o.dir);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 1u);
  // A truncated file is DataLoss, naming it.
  ASSERT_TRUE(WriteFileAtomically(o.dir + "/cut.json.gz", raw->substr(0, raw->size() / 2)).ok());
  auto cut = ReadTrace(o.dir + "/cut.json.gz");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(cut.status().message().find("cut.json.gz"), std::string::npos);
  EXPECT_EQ(ReadTrace(o.dir + "/none.json").status().code(), StatusCode::kNotFound);
}

json Doc(std::vector<json> events) {
  json all = json::array({{{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", "p"}}}},
                          {{"ph", "M"}, {"name", "thread_name"}, {"pid", 0}, {"tid", 1}, {"args", {{"name", "t"}}}}});
  for (json& e : events) all.push_back(std::move(e));
  return {{"traceEvents", all}};
}

json X(double ts, double dur, const char* name = "x") {
  return {{"ph", "X"}, {"name", name}, {"pid", 0}, {"tid", 1}, {"ts", ts}, {"dur", dur}};
}

TEST(ValidateTest, AcceptsNestingRejectsOverlap) {
  EXPECT_TRUE(Validate(Doc({X(0, 10), X(1, 2), X(3, 7), X(10, 5)})).ok());
  const Status s = Validate(Doc({X(0, 10), X(5, 10, "late")}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'late'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("without nesting"), std::string::npos) << s.ToString();
}

TEST(ValidateTest, RejectsMalformedEvents) {
  json no_dur = X(0, 1);
  no_dur.erase("dur");
  json negative = X(0, -1);
  json no_ts = X(0, 1);
  no_ts.erase("ts");
  json bad_counter = {{"ph", "C"}, {"name", "mem"}, {"pid", 0}, {"ts", 0}, {"args", {{"a", "x"}}}};
  json unnamed = X(0, 1);
  unnamed["pid"] = 7;
  json unnamed_track = X(0, 1);
  unnamed_track["tid"] = 9;
  json bad_ph = X(0, 1);
  bad_ph["ph"] = "Q";
  for (const auto& [e, want] : std::vector<std::pair<json, std::string>>{
           {no_dur, "dur"}, {negative, "dur"}, {no_ts, "ts"}, {bad_counter, "counter series 'a'"},
           {unnamed, "process 7 has no process_name"}, {unnamed_track, "track 9"}, {bad_ph, "ph"}}) {
    const Status s = Validate(Doc({e}));
    ASSERT_FALSE(s.ok()) << want;
    EXPECT_NE(s.message().find(want), std::string::npos) << s.ToString();
  }
  EXPECT_FALSE(Validate(json::object()).ok());
  EXPECT_FALSE(Validate(json::array()).ok());
}

// Two ranks whose wall clocks disagree by 50 ms: the world group's
// collectives (ending together in reality) bring them back together.
TEST(MergeTest, AlignsRanksOnTheWorldGroupsCollectives) {
  Recorder a({0, 2, 0, "a", ""}), b({1, 2, 1, "b", ""});
  a.Start();
  b.Start();
  const int ta = a.Track("gloo world"), tb = b.Track("gloo world");
  for (int seq = 0; seq < 5; ++seq) {
    const double begin_a = a.NowUs(), begin_b = b.NowUs();
    usleep(2000);
    const double end_a = a.NowUs(), end_b = b.NowUs();
    a.Complete(ta, "all_reduce", "collective", begin_a, end_a, {{"group", "world"}, {"seq", seq}, {"bytes", 4}});
    b.Complete(tb, "all_reduce", "collective", begin_b + 300, end_b, {{"group", "world"}, {"seq", seq}, {"bytes", 4}});
  }
  json da = a.ToJson(), db = b.ToJson();
  db["otherData"]["hypertrain"]["unix_us_at_zero"] = db["otherData"]["hypertrain"]["unix_us_at_zero"].get<int64_t>() + 50000;
  MergeReport report;
  auto merged = Merge({da, db}, {}, &report);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(report.ranks, 2);
  EXPECT_NEAR(report.collective_fix_us[1], -50000, 500);
  EXPECT_TRUE(Validate(*merged).ok());
  std::map<int64_t, std::vector<double>> ends;
  for (const json& e : (*merged)["traceEvents"]) {
    if (e["ph"] == "X") ends[e["pid"]].push_back(e["ts"].get<double>() + e["dur"].get<double>());
  }
  ASSERT_EQ(ends[0].size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(ends[0][i], ends[1][i], 500) << i;
  // Without alignment the 50 ms stay.
  auto raw = Merge({da, db}, {false}, &report);
  ASSERT_TRUE(raw.ok());
  double first0 = 1e18, first1 = 1e18;
  for (const json& e : (*raw)["traceEvents"]) {
    if (e["ph"] != "X") continue;
    (e["pid"] == 0 ? first0 : first1) = std::min(e["pid"] == 0 ? first0 : first1, e["ts"].get<double>());
  }
  EXPECT_GT(first1 - first0, 40000);
  const std::string summary = Summarize(*merged);
  EXPECT_NE(summary.find("rank 1:"), std::string::npos) << summary;
  EXPECT_NE(summary.find("gloo world: 5 x"), std::string::npos) << summary;
}

// Ranks on one host read one clock: their wall clocks are kept even when
// their collectives' end times differ (a worker thread woken late), and a
// second host gets one correction for all its ranks.
TEST(MergeTest, RanksOfOneHostShareOneCorrection) {
  Recorder r0({0, 4, 0, "h0", ""}), r1({1, 4, 0, "h0", ""}), r2({2, 4, 1, "h1", ""}), r3({3, 4, 1, "h1", ""});
  std::vector<Recorder*> rs = {&r0, &r1, &r2, &r3};
  for (Recorder* r : rs) r->Start();
  std::vector<int> tracks;
  for (Recorder* r : rs) tracks.push_back(r->Track("gloo world"));
  for (int seq = 0; seq < 5; ++seq) {
    for (size_t i = 0; i < rs.size(); ++i) {
      // 1 ms each; rank 1's and rank 3's ends recorded 1.5 ms late on every
      // other seq.
      const double begin = rs[i]->NowUs();
      const double late = (i % 2 == 1 && seq % 2 == 0) ? 1500 : 0;
      rs[i]->Complete(tracks[i], "all_reduce", "collective", begin, begin + 1000 + late,
                      {{"group", "world"}, {"seq", seq}, {"bytes", 4}});
    }
    usleep(4000);
  }
  std::vector<json> docs;
  for (Recorder* r : rs) docs.push_back(r->ToJson());
  for (int i : {2, 3}) {  // host h1's clock is 20 ms ahead
    auto& zero = docs[i]["otherData"]["hypertrain"]["unix_us_at_zero"];
    zero = zero.get<int64_t>() + 20000;
  }
  MergeReport report;
  auto merged = Merge(docs, {}, &report);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  ASSERT_EQ(report.collective_fix_us.size(), 4u);
  EXPECT_EQ(report.collective_fix_us[0], 0);
  EXPECT_EQ(report.collective_fix_us[1], 0);  // same host as rank 0: no correction
  EXPECT_NEAR(report.collective_fix_us[2], -20000, 1000);
  EXPECT_EQ(report.collective_fix_us[2], report.collective_fix_us[3]);
}

TEST(MergeTest, RefusesDuplicateRanksAndForeignFiles) {
  Recorder a({0, 2, 0, "a", ""});
  auto dup = Merge({a.ToJson(), a.ToJson()}, {}, nullptr);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("two inputs are rank 0"), std::string::npos);
  auto foreign = Merge({Doc({X(0, 1)})}, {}, nullptr);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("otherData"), std::string::npos);
}

// A real CPU pass through the decorator: forward holds every block's forward,
// backward every block's backward, all nested; outside the window nothing.
TEST(TracingHooksTest, RecordsTheStructureOfARealPass) {
  model::ModelConfig cfg = *model::NamedModelConfig("tiny");
  cfg.max_context_width = 16;
  model::BackendOptions o;
  o.micro_batch_size = 2;
  o.seq_len = 16;
  auto backend = cpu::CpuBackend::Create(cfg, o);
  ASSERT_TRUE(backend.ok());
  std::vector<std::string> names;
  for (const auto& u : (*backend)->layout().units()) names.push_back(u.name);
  Recorder r({0, 1, 0, "h", ""});
  model::NoOpUnitHooks inner;
  TracingHooks hooks(inner, r, names);
  std::vector<int32_t> tokens(32);
  for (int i = 0; i < 32; ++i) tokens[i] = (i * 37) % 256;
  model::TokenBatch b{tokens.data(), tokens.data(), 2, 16, nullptr};
  ASSERT_TRUE((*backend)->ForwardBackward(b, 1.0f, hooks).ok());
  EXPECT_EQ(r.event_count(), 0);
  r.Start();
  ASSERT_TRUE(hooks.BeginMicroBatch(0, true).ok());
  ASSERT_TRUE((*backend)->ForwardBackward(b, 1.0f, hooks).ok());
  ASSERT_TRUE(hooks.FinishGradients().ok());
  r.Stop();
  const json doc = r.ToJson();
  ASSERT_TRUE(Validate(doc).ok()) << Validate(doc).ToString();
  std::map<std::string, std::pair<double, double>> span;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "X") span[e["name"]] = {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()};
  }
  ASSERT_TRUE(span.count("forward") && span.count("backward")) << doc.dump();
  EXPECT_LE(span["forward"].second, span["backward"].first);
  for (int l = 0; l < 4; ++l) {
    const std::string f = "fwd layers." + std::to_string(l), bw = "bwd layers." + std::to_string(l);
    ASSERT_TRUE(span.count(f) && span.count(bw)) << l;
    EXPECT_GE(span[f].first, span["forward"].first);
    EXPECT_LE(span[f].second, span["forward"].second);
    EXPECT_GE(span[bw].first, span["backward"].first);
    EXPECT_LE(span[bw].second, span["backward"].second);
  }
  EXPECT_EQ(CountEvents(doc, "X", "before_forward"), 5);   // embedding + 4 blocks
  EXPECT_EQ(CountEvents(doc, "X", "after_backward"), 5);
  EXPECT_EQ(CountEvents(doc, "X", "finish_gradients"), 1);
  EXPECT_EQ(CountEvents(doc, "i", "micro_batch"), 1);
}

TEST(GzipTest, RoundTrip) {
  std::string big;
  for (int i = 0; i < 100000; ++i) big += std::to_string(i) + ",";
  auto z = GzipCompress(big);
  ASSERT_TRUE(z.ok());
  EXPECT_LT(z->size(), big.size() / 2);
  auto back = GzipDecompress(*z, "x");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, big);
  EXPECT_FALSE(GzipDecompress("\x1f\x8bnot gzip", "x").ok());
}

}  // namespace
}  // namespace hypertrain::trace
