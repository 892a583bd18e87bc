// Decide's rows about capacity: a gang not all Running within the scheduling
// timeout (torn down, retried after a backoff, or Failed), and the resizes of
// an elastic job (shrink after the timeout, grow when capacity returns).
#include <algorithm>

#include "core/time.h"
#include "operator/controller/elastic.h"
#include "operator/controller/plan_pass.h"

namespace hypertrain::controller::plan_internal {
namespace {

using std::chrono::milliseconds;

// Why the gang is not all Running: waiting for admission, or the scheduler's
// word on the lowest pending rank.
std::string PendingMessage(Pass& p, const Gang& gang) {
  int gated = 0, unbound = 0;
  const ObservedPod* first = nullptr;
  for (const auto& [rank, pod] : gang) {
    gated += pod->gated;
    if (!pod->node_name.empty()) continue;
    ++unbound;
    if (!first && !pod->unschedulable_message.empty()) first = pod;
  }
  const std::string of = " of " + std::to_string(p.nodes()) + " pods";
  if (gated > 0) {
    const api::GangScheduling& g = p.s().scheduling.gang;
    return g.provider == api::GangProvider::kKueue
               ? "waiting for admission by Kueue (LocalQueue " + g.queue_name + "): " + std::to_string(gated) + of +
                     " gated"
               : std::to_string(gated) + of + " have scheduling gates";
  }
  if (first) return "pod " + first->name + ": " + first->unschedulable_message;
  if (unbound > 0) return std::to_string(unbound) + of + " not yet bound to a node";
  return "";
}

}  // namespace

// Row "a gang not all Running within runPolicy.schedulingTimeoutSeconds": torn
// down (its pods deleted: no partial gang holds GPUs), then created again after
// a backoff while schedulingRetry lasts, else Failed/Unschedulable. The clock
// starts when every pod exists and none is gated (Kueue has admitted it).
// True when it decided the pass.
bool SchedulingTimedOut(Pass& p, const Gang& gang) {
  api::SchedulingStatus& sc = p.status().scheduling;
  if (std::all_of(gang.begin(), gang.end(), [](const auto& rp) { return rp.second->phase == "Running"; })) {
    return false;
  }
  // Once Running in this attempt, a pod that stops running is a fault, not a
  // scheduling matter.
  if (api::IsConditionTrue(p.status(), api::kCondRunning)) return false;
  sc.message = PendingMessage(p, gang);
  const bool gated = std::any_of(gang.begin(), gang.end(), [](const auto& rp) { return rp.second->gated; });
  if (gated) {
    sc.start_time.clear();
    return false;
  }
  if (sc.start_time.empty()) sc.start_time = p.now_str;
  const api::RunPolicy& rp = p.s().run_policy;
  if (rp.scheduling_timeout_seconds <= 0) return false;
  const auto deadline = ParseRfc3339(sc.start_time).value_or(p.now) + std::chrono::seconds(rp.scheduling_timeout_seconds);
  if (p.now < deadline) {
    p.RequeueAtMost(std::chrono::ceil<milliseconds>(deadline - p.now));
    return false;
  }
  p.plan.decision = Case::kUnschedulable;
  int running = 0, bound = 0;
  std::string pending_pod;
  for (const auto& [rank, pod] : gang) {
    running += pod->phase == "Running";
    bound += !pod->node_name.empty();
    if (pending_pod.empty() && pod->phase != "Running") pending_pod = pod->name;
  }
  const std::string nodes = std::to_string(p.nodes());
  std::string msg = "the gang was not all Running within schedulingTimeoutSeconds=" +
                    std::to_string(rp.scheduling_timeout_seconds) + " (" + std::to_string(running) + " of " + nodes +
                    " pods Running, " + std::to_string(bound) + " bound to nodes)";
  if (!sc.message.empty()) msg += "; " + sc.message;
  p.status().last_fault = api::Fault{api::reason::kUnschedulable, msg, pending_pod, "", std::nullopt, std::nullopt,
                                     p.now_str};
  // Elastic above minNodes: shrink to what fits, at once (no retry is spent).
  if (auto shrink = SizeAfterTimeout(p.s(), p.nodes(), gang, p.in.cluster_nodes, p.status().excluded_nodes)) {
    p.plan.decision = Case::kResized;
    NewAttempt(p);
    Resize(p, *shrink, true);
    DeleteAllPods(p);
    return true;
  }
  const api::SchedulingRetry& retry = rp.scheduling_retry;
  const int done = sc.timeouts++;
  const bool budget = !retry.counts_toward_backoff_limit || p.status().restart_count < rp.backoff_limit;
  if (done >= retry.limit || !budget) {
    if (done < retry.limit) msg += "; restart budget backoffLimit=" + std::to_string(rp.backoff_limit) + " exhausted";
    Finish(p, api::kCondFailed, api::reason::kUnschedulable, msg);
    DeletePods(p, [](const ObservedPod& pod) { return !pod.Terminated(); });
    return true;
  }
  const int64_t wait = retry.BackoffSeconds(done);
  sc.retry_time = FormatRfc3339(p.now + std::chrono::seconds(wait));
  if (retry.counts_toward_backoff_limit) ++p.status().restart_count;
  NewAttempt(p);
  msg += "; torn down, retry " + std::to_string(done + 1) + " of " + std::to_string(retry.limit) + " in " +
         std::to_string(wait) + "s";
  if (api::IsConditionTrue(p.status(), api::kCondRestarting)) {
    p.extra_events.push_back(Event{EventType::kWarning, api::reason::kUnschedulable, msg});
  }
  p.SetCondition(api::kCondRestarting, true, api::reason::kUnschedulable, msg);
  DeleteAllPods(p);
  return true;
}

// Row "a torn-down gang in its backoff": nothing is created before
// status.scheduling.retryTime. True while waiting.
bool WaitingToRetry(Pass& p) {
  const std::string& at = p.status().scheduling.retry_time;
  if (at.empty()) return false;
  const auto t = ParseRfc3339(at);
  if (!t || p.now >= *t) return false;
  p.plan.decision = Case::kSchedulingBackoff;
  p.RequeueAtMost(std::chrono::ceil<milliseconds>(*t - p.now));
  return true;
}

// Elastic: the size of the next attempt is recorded, currentNodes follows; the
// Restarting condition says why (`restarting`), else one Resized event does.
void Resize(Pass& p, const SizeChoice& choice, bool restarting) {
  const int from = p.nodes();
  StartSizeHistory(&p.status(), from, p.status().start_time);
  RecordResize(&p.status(), choice, p.now_str);
  p.status().gpus = choice.nodes * p.s().gpus_per_node;
  p.status().world_size = choice.nodes * p.s().nproc_per_node;
  const std::string msg =
      "resized from " + std::to_string(from) + " to " + std::to_string(choice.nodes) + " nodes: " + choice.reason;
  if (!restarting) {
    p.extra_events.push_back(Event{EventType::kNormal, api::reason::kResized, msg});
    return;
  }
  // Already Restarting (no condition transition): still one event per resize.
  if (api::IsConditionTrue(p.status(), api::kCondRestarting)) {
    p.extra_events.push_back(Event{EventType::kWarning, api::reason::kResized, msg});
  }
  p.SetCondition(api::kCondRestarting, true, api::reason::kResized, msg);
}

// Row "a gang restart of an elastic job below maxNodes": the restart is a
// resize point, so the next attempt takes whatever capacity allows now (no
// minResizeIntervalSeconds: the gang restarts anyway).
void GrowAtRestart(Pass& p) {
  if (auto grow = SizeToGrow(p.s(), p.nodes(), p.in.cluster_nodes, p.status().excluded_nodes)) Resize(p, *grow, false);
}

// Row "an elastic job running below maxNodes": when the nodes able to host a
// pod allow a larger size and minResizeIntervalSeconds has passed since the
// last resize, the gang restarts on it (the pods get SIGTERM and save a
// checkpoint first). Capacity is looked at again every checkIntervalSeconds
// (and on node changes). True when it resized.
bool GrowWhenCapacityReturns(Pass& p) {
  if (!p.s().elastic || p.nodes() >= p.s().elastic->max_nodes) return false;
  const api::Elastic& e = *p.s().elastic;
  auto grow = SizeToGrow(p.s(), p.nodes(), p.in.cluster_nodes, p.status().excluded_nodes);
  if (!grow) {
    p.RequeueAtMost(std::chrono::seconds(e.check_interval_seconds));
    return false;
  }
  // Counted from the last resize, or from the start (a job with maxNodes above
  // nodes does not restart right after it began).
  const std::string& last = p.status().elastic.last_resize_time;
  const auto since = ParseRfc3339(last.empty() ? p.status().start_time : last).value_or(p.now);
  const auto earliest = since + std::chrono::seconds(e.min_resize_interval_seconds);
  if (p.now < earliest) {
    p.RequeueAtMost(std::chrono::ceil<milliseconds>(earliest - p.now));
    return false;
  }
  p.plan.decision = Case::kResized;
  NewAttempt(p);
  Resize(p, *grow, true);
  DeleteAllPods(p);
  return true;
}

// status.currentNodes: spec.nodes; an elastic job keeps the size it runs on
// while that is one of its sizes.
void SetCurrentNodes(Pass& p) {
  int32_t& current = p.status().current_nodes;
  const auto& e = p.s().elastic;
  if (!e || std::find(e->sizes.begin(), e->sizes.end(), current) == e->sizes.end()) current = p.s().nodes;
}

}  // namespace hypertrain::controller::plan_internal
