#include "localcluster/apiserver/api_server.h"

#include <openssl/crypto.h>

#include <sstream>

#include "localcluster/apiserver/patch.h"
#include "localcluster/apiserver/protobuf.h"
#include "localcluster/apiserver/request_params.h"
#include "localcluster/apiserver/selectors.h"
#include "localcluster/apiserver/table.h"

namespace kubelocal {
namespace {

constexpr size_t kMaxBody = 3 * 1024 * 1024;

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : path) {
    if (c == '/') {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) parts.push_back(cur);
  return parts;
}

Status PathNotFound() {
  return MakeApiError(404, "NotFound", "the server could not find the requested resource");
}

std::map<std::string, std::string> WarningHeaders(const std::vector<std::string>& warnings) {
  std::map<std::string, std::string> h;
  std::string all;
  for (const auto& w : warnings) {
    std::string esc;
    for (char c : w) {
      if (c == '"' || c == '\\') esc += '\\';
      esc += c;
    }
    all += (all.empty() ? "" : ", ") + std::string("299 - \"") + esc + "\"";
  }
  if (!all.empty()) h["Warning"] = all;
  return h;
}

StatusOr<json> ParseBody(const HttpRequest& req) {
  if (req.body.size() > kMaxBody) return RequestEntityTooLarge("request entity too large");
  std::string ct = req.Header("content-type");
  if (ct.find("application/vnd.kubernetes.protobuf") != std::string::npos) {
    return DecodeKubernetesProtobuf(req.body);
  }
  if (ct.find("protobuf") != std::string::npos || ct.find("cbor") != std::string::npos) {
    return UnsupportedMediaType("the body of the request was in an unknown format - accepted "
                                "media types include: application/json, application/yaml");
  }
  if (ct.find("yaml") != std::string::npos) {
    auto j = YamlToJson(req.body);
    if (!j.ok()) return j.status();
    return *j;
  }
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) {
    return BadRequest("the object provided is unrecognized (request body is not valid JSON)");
  }
  return j;
}

WriteOptions WriteOptionsFrom(const HttpRequest& req) {
  WriteOptions o;
  o.dry_run = req.Query("dryRun") == "All";
  o.field_validation = req.Query("fieldValidation");
  return o;
}

}  // namespace

void SendJson(ResponseSink& sink, int code, const json& body,
              const std::map<std::string, std::string>& headers) {
  sink.Send(code, "application/json", body.dump(), headers);
}

void SendError(ResponseSink& sink, const Status& e) {
  std::map<std::string, std::string> h;
  if (int ra = RetryAfterSeconds(e); ra > 0) h["Retry-After"] = std::to_string(ra);
  SendJson(sink, HttpCode(e), ToStatusJson(e), h);
}

ApiServer::ApiServer(Store* store, ApiServerOptions options)
    : store_(store),
      options_(std::move(options)),
      ops_(store, &registry_),
      gc_(&ops_, options_.gc_period) {
  ops_.SetDeletionHook([this] { gc_.Kick(); });
}

ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Start() {
  ops_.LoadCrds();
  if (Status e = ops_.EnsureDefaultNamespaces(); !e.ok()) return e;
  gc_.Start();
  return Status();
}

void ApiServer::Stop() {
  if (stopping_.exchange(true)) return;
  store_->hub().DropAll();
  gc_.Stop();
}

bool ApiServer::Authenticated(const HttpRequest& req) const {
  if (!req.client_cert_user.empty()) return true;
  const std::string auth = req.Header("authorization");
  const std::string prefix = "Bearer ";
  if (auth.size() <= prefix.size() || auth.compare(0, prefix.size(), prefix) != 0) return false;
  std::string got = auth.substr(prefix.size());
  while (!got.empty() && got.back() == ' ') got.pop_back();
  if (got.size() != options_.token.size() || options_.token.empty()) return false;
  return CRYPTO_memcmp(got.data(), options_.token.data(), got.size()) == 0;
}

void ApiServer::Handle(const HttpRequest& req, ResponseSink& sink) {
  const std::string& p = req.path;
  const bool anonymous_ok = p == "/healthz" || p == "/livez" || p == "/readyz" || p == "/version" ||
                            p.rfind("/healthz/", 0) == 0 || p.rfind("/readyz/", 0) == 0 ||
                            p.rfind("/livez/", 0) == 0;
  if (!anonymous_ok && !Authenticated(req)) return SendError(sink, Unauthorized());
  if (Status e = faults_.OnRequest(p); !e.ok()) return SendError(sink, e);
  if (p.rfind("/_local/", 0) == 0) return HandleAdmin(req, sink);
  if (HandleNonResource(req, sink)) return;

  auto parts = SplitPath(p);
  std::string group, version;
  size_t i;
  if (parts.size() >= 3 && parts[0] == "api") {
    version = parts[1];
    i = 2;
  } else if (parts.size() >= 4 && parts[0] == "apis") {
    group = parts[1];
    version = parts[2];
    i = 3;
  } else {
    return SendError(sink, PathNotFound());
  }
  std::vector<std::string> rest(parts.begin() + i, parts.end());
  Target t;
  if (rest.size() > 2 && rest[0] == "namespaces" && rest[2] != "status" && rest[2] != "finalize") {
    t.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (rest.empty() || rest.size() > 3) return SendError(sink, PathNotFound());
  auto type = registry_.Find(group, version, rest[0]);
  if (!type) return SendError(sink, PathNotFound());
  t.type = *type;
  if (rest.size() > 1) t.name = rest[1];
  if (rest.size() > 2) t.sub = rest[2];
  if (!t.type.namespaced && !t.ns.empty()) return SendError(sink, PathNotFound());
  if (!t.sub.empty() && !(t.sub == "status" && t.type.has_status) &&
      !(t.sub == "binding" && t.type.plural == "pods" && t.type.group.empty())) {
    return SendError(sink, PathNotFound());
  }
  HandleResource(req, sink, t);
}

void ApiServer::HandleResource(const HttpRequest& req, ResponseSink& sink, const Target& t) {
  const ResourceType& type = t.type;
  const bool want_table = WantsTable(req.Header("accept"));
  const bool status = t.sub == "status";
  std::vector<std::string> warnings;
  auto reply = [&](int code, const json& obj) {
    if (want_table && req.method == "GET") {
      return SendJson(sink, code, MakeTable(type, {obj}, IncludeFrom(req), MetaStr(obj, "resourceVersion"), "", 0),
                      WarningHeaders(warnings));
    }
    SendJson(sink, code, obj, WarningHeaders(warnings));
  };
  const bool needs_ns = type.namespaced && t.ns.empty();
  if (req.method == "GET") {
    if (t.name.empty()) {
      if (Truthy(req.Query("watch"))) return HandleWatch(req, sink, t);
      return HandleList(req, sink, t);
    }
    if (needs_ns) return SendError(sink, PathNotFound());
    auto r = ops_.Get(type, t.ns, t.name);
    if (!r.ok()) return SendError(sink, r.status());
    return reply(200, *r);
  }
  if (req.method == "POST") {
    if (!t.name.empty() && t.sub == "binding") return HandleBinding(req, sink, t);
    if (!t.name.empty()) return SendError(sink, MethodNotAllowed("the server does not allow this method on the requested resource"));
    if (needs_ns) return SendError(sink, PathNotFound());
    auto body = ParseBody(req);
    if (!body.ok()) return SendError(sink, body.status());
    auto r = ops_.Create(type, t.ns, std::move(*body), WriteOptionsFrom(req), &warnings);
    if (!r.ok()) return SendError(sink, r.status());
    return reply(201, *r);
  }
  if (req.method == "PUT") {
    if (t.name.empty() || needs_ns) {
      return SendError(sink, MethodNotAllowed("the server does not allow this method on the requested resource"));
    }
    auto body = ParseBody(req);
    if (!body.ok()) return SendError(sink, body.status());
    auto r = ops_.Update(type, t.ns, t.name, std::move(*body), status, WriteOptionsFrom(req), &warnings);
    if (!r.ok()) return SendError(sink, r.status());
    return reply(200, *r);
  }
  if (req.method == "PATCH") {
    if (t.name.empty() || needs_ns) {
      return SendError(sink, MethodNotAllowed("the server does not allow this method on the requested resource"));
    }
    auto pt = PatchTypeFromContentType(req.Header("content-type"));
    if (!pt.ok()) return SendError(sink, pt.status());
    if (req.body.size() > kMaxBody) return SendError(sink, RequestEntityTooLarge("request entity too large"));
    const bool existed = store_->Get(type.storage_key(), type.namespaced ? t.ns : "", t.name).has_value();
    auto r = ops_.Patch(type, t.ns, t.name, *pt, req.body, status, WriteOptionsFrom(req), &warnings);
    if (!r.ok()) return SendError(sink, r.status());
    return reply(existed ? 200 : 201, *r);
  }
  if (req.method == "DELETE") return HandleDelete(req, sink, t);
  SendError(sink, MethodNotAllowed("the server does not allow this method on the requested resource"));
}

// POST pods/NAME/binding: the scheduler's bind, once.
void ApiServer::HandleBinding(const HttpRequest& req, ResponseSink& sink, const Target& t) {
  auto body = ParseBody(req);
  if (!body.ok()) return SendError(sink, body.status());
  std::string node = body->value("/target/name"_json_pointer, std::string());
  if (node.empty()) {
    return SendError(sink, Invalid("Binding", t.name, {{"FieldValueRequired", "target.name", "Required value"}}));
  }
  json patch = {{"spec", {{"nodeName", node}}}};
  auto cur = ops_.Get(t.type, t.ns, t.name);
  if (!cur.ok()) return SendError(sink, cur.status());
  if (!cur->value("/spec/nodeName"_json_pointer, std::string()).empty()) {
    return SendError(sink, Conflict("pods/binding", t.name,
                                    "pod " + t.name + " is already assigned to node \"" +
                                        (*cur)["spec"]["nodeName"].get<std::string>() + "\""));
  }
  auto r = ops_.Patch(t.type, t.ns, t.name, PatchType::kMerge, patch.dump(), false, {}, nullptr);
  if (!r.ok()) return SendError(sink, r.status());
  SendJson(sink, 201, {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()},
                       {"status", "Success"}, {"code", 201}});
}

// DELETE of one object, or of a collection (by label and field selector).
void ApiServer::HandleDelete(const HttpRequest& req, ResponseSink& sink, const Target& t) {
  const ResourceType& type = t.type;
  auto opts = DeleteOptions::Parse(req.body, [&](const std::string& k) { return req.Query(k); });
  if (!opts.ok()) return SendError(sink, opts.status());
  if (!t.sub.empty()) {
    return SendError(sink, MethodNotAllowed("the server does not allow this method on the requested resource"));
  }
  if (!t.name.empty()) {
    if (type.namespaced && t.ns.empty()) return SendError(sink, PathNotFound());
    auto r = ops_.Delete(type, t.ns, t.name, *opts);
    if (!r.ok()) return SendError(sink, r.status());
    return SendJson(sink, 200, r->object);
  }
  auto ls = LabelSelector::Parse(req.Query("labelSelector"));
  if (!ls.ok()) return SendError(sink, ls.status());
  auto fs = FieldSelector::Parse(req.Query("fieldSelector"));
  if (!fs.ok()) return SendError(sink, fs.status());
  auto page = store_->List(type.storage_key(), type.namespaced ? t.ns : "",
                           [&](const json& o) { return ls->Matches(o) && fs->Matches(o); }, 0, "");
  if (!page.ok()) return SendError(sink, page.status());
  json items = json::array();
  for (const auto& o : page->items) {
    auto r = ops_.Delete(type, MetaStr(o, "namespace"), MetaStr(o, "name"), *opts);
    if (r.ok()) items.push_back(r->object);
  }
  SendJson(sink, 200, {{"kind", type.kind + "List"}, {"apiVersion", type.api_version()},
                       {"metadata", {{"resourceVersion", std::to_string(store_->CurrentRV())}}},
                       {"items", items}});
}

void ApiServer::HandleList(const HttpRequest& req, ResponseSink& sink, const Target& t) {
  auto pred = SelectorPredicate(req, t.type);
  if (!pred.ok()) return SendError(sink, pred.status());
  int64_t limit = 0;
  if (!req.Query("limit").empty()) {
    try {
      limit = std::stoll(req.Query("limit"));
    } catch (const std::exception&) {
      return SendError(sink, BadRequest("invalid limit: " + req.Query("limit")));
    }
  }
  auto page = store_->List(t.type.storage_key(), t.type.namespaced ? t.ns : "", *pred, limit,
                           req.Query("continue"));
  if (!page.ok()) return SendError(sink, page.status());
  std::vector<json> items;
  items.reserve(page->items.size());
  for (auto& o : page->items) items.push_back(ObjectOps::ForVersion(t.type, std::move(o)));
  const std::string rv = std::to_string(page->resource_version);
  if (WantsTable(req.Header("accept"))) {
    return SendJson(sink, 200,
                    MakeTable(t.type, items, IncludeFrom(req), rv, page->continue_token, page->remaining));
  }
  json meta = {{"resourceVersion", rv}};
  if (!page->continue_token.empty()) {
    meta["continue"] = page->continue_token;
    meta["remainingItemCount"] = page->remaining;
  }
  SendJson(sink, 200,
           {{"kind", t.type.kind + "List"}, {"apiVersion", t.type.api_version()}, {"metadata", meta},
            {"items", items}});
}

bool ApiServer::HandleNonResource(const HttpRequest& req, ResponseSink& sink) {
  const std::string& p = req.path;
  auto parts = SplitPath(p);
  if (p == "/healthz" || p == "/livez" || p == "/readyz" || p.rfind("/healthz/", 0) == 0 ||
      p.rfind("/livez/", 0) == 0 || p.rfind("/readyz/", 0) == 0) {
    sink.Send(200, "text/plain; charset=utf-8", "ok");
    return true;
  }
  if (req.method != "GET" && req.method != "HEAD") return false;
  if (p == "/version" || p == "/version/") {
    SendJson(sink, 200,
             {{"major", "1"}, {"minor", "32"}, {"gitVersion", "v1.32.0"},
              {"gitCommit", "kube-local"}, {"gitTreeState", "clean"},
              {"buildDate", "2026-01-01T00:00:00Z"}, {"goVersion", "n/a (C++ kube-local)"},
              {"compiler", "gc"}, {"platform", "linux/amd64"}});
    return true;
  }
  if (parts.size() == 1 && parts[0] == "api") {
    SendJson(sink, 200, registry_.ApiVersions(options_.server_address));
    return true;
  }
  if (parts.size() == 2 && parts[0] == "api") {
    auto l = registry_.ApiResourceList("", parts[1]);
    if (!l) return false;
    SendJson(sink, 200, *l);
    return true;
  }
  if (parts.size() == 1 && parts[0] == "apis") {
    SendJson(sink, 200, registry_.ApiGroupList());
    return true;
  }
  if (parts.size() == 2 && parts[0] == "apis") {
    auto g = registry_.ApiGroup(parts[1]);
    if (!g) return false;
    SendJson(sink, 200, *g);
    return true;
  }
  if (parts.size() == 3 && parts[0] == "apis") {
    auto l = registry_.ApiResourceList(parts[1], parts[2]);
    if (!l) return false;
    SendJson(sink, 200, *l);
    return true;
  }
  if (p == "/openapi/v2") {
    // An empty protobuf Document: kubectl parses it, finds no schemas and
    // leaves validation to the server.
    sink.Send(200, "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", "");
    return true;
  }
  if (p == "/openapi/v3" || p == "/openapi/v3/") {
    SendJson(sink, 200, OpenApiV3Root());
    return true;
  }
  if (p.rfind("/openapi/v3/", 0) == 0) {
    auto doc = OpenApiV3Doc(p.substr(std::string("/openapi/v3/").size()));
    if (!doc) return false;
    SendJson(sink, 200, *doc);
    return true;
  }
  return false;
}

json ApiServer::OpenApiV3Root() const {
  json paths = json::object();
  for (const auto& t : registry_.All()) {
    std::string gv = t.group.empty() ? "api/" + t.version : "apis/" + t.group + "/" + t.version;
    paths[gv] = {{"serverRelativeURL", "/openapi/v3/" + gv + "?hash=" + std::to_string(store_->CurrentRV())}};
  }
  return {{"paths", paths}};
}

std::optional<json> ApiServer::OpenApiV3Doc(const std::string& gv_path) const {
  // Paths only: each PATCH declares fieldValidation so kubectl leaves schema
  // validation to the server (no request bodies: kubectl then computes
  // strategic merge patches from its compiled-in types).
  json paths = json::object();
  bool found = false;
  for (const auto& t : registry_.All()) {
    std::string gv = t.group.empty() ? "api/" + t.version : "apis/" + t.group + "/" + t.version;
    if (gv != gv_path) continue;
    found = true;
    json gvk = {{"group", t.group}, {"version", t.version}, {"kind", t.kind}};
    json params = json::array({{{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
                               {{"name", "dryRun"}, {"in", "query"}, {"schema", {{"type", "string"}}}}});
    json op = {{"parameters", params},
               {"x-kubernetes-group-version-kind", gvk},
               {"responses", {{"200", {{"description", "OK"}}}}}};
    std::string base = "/" + gv + (t.namespaced ? "/namespaces/{namespace}/" : "/") + t.plural;
    paths[base] = {{"post", op}};
    paths[base + "/{name}"] = {{"patch", op}, {"put", op}};
  }
  if (!found) return std::nullopt;
  return json{{"openapi", "3.0.0"}, {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0"}}},
              {"paths", paths}, {"components", {{"schemas", json::object()}}}};
}

namespace {

int QueryInt(const HttpRequest& req, const std::string& k, int def) {
  const std::string v = req.Query(k);
  if (v.empty()) return def;
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    return def;
  }
}

}  // namespace

bool ApiServer::HandleFaultEndpoint(const std::string& what, const HttpRequest& req, ResponseSink& sink) {
  if (what == "fail") {
    if (Status e = faults_.FailNext(QueryInt(req, "count", 1), QueryInt(req, "code", 500),
                                    QueryInt(req, "retryAfterSeconds", 1));
        !e.ok()) {
      SendError(sink, e);
      return true;
    }
  } else if (what == "latency") {
    faults_.SetLatencyMs(QueryInt(req, "ms", 0));
  } else if (what == "expire-next-watches") {
    faults_.ExpireNextWatches(QueryInt(req, "count", 1));
  } else if (what == "watch-expiry") {
    const std::string as = req.Query("as");
    if (as != "event" && as != "http") {
      SendError(sink, BadRequest("as must be event or http"));
      return true;
    }
    faults_.SetWatchExpiryStyle(as == "http" ? FaultInjector::ExpiryStyle::kHttp410
                                             : FaultInjector::ExpiryStyle::kErrorEvent);
  } else if (what == "watch-chunking") {
    try {
      faults_.SetWatchChunkSeed(std::stoull(req.Query("seed")));
    } catch (const std::exception&) {
      SendError(sink, BadRequest("seed must be a non-negative integer (0: one event per chunk)"));
      return true;
    }
  } else if (what == "stall-watches") {
    faults_.SetWatchesStalled(req.Query("stalled").empty() || Truthy(req.Query("stalled")));
  } else if (what == "reset-faults") {
    faults_.Reset();
  } else {
    return false;
  }
  SendJson(sink, 200, faults_.State());
  return true;
}

void ApiServer::HandleAdmin(const HttpRequest& req, ResponseSink& sink) {
  const std::string what = req.path.substr(std::string("/_local/").size());
  json ok = {{"ok", true}};
  if (what == "state" && req.method == "GET") {
    return SendJson(sink, 200,
                    {{"resourceVersion", std::to_string(store_->CurrentRV())},
                     {"compactedResourceVersion", std::to_string(store_->hub().compacted_rv())},
                     {"watchers", store_->hub().watcher_count()},
                     {"faults", faults_.State()}});
  }
  if (req.method != "POST") return SendError(sink, MethodNotAllowed("admin endpoints take POST"));
  if (HandleFaultEndpoint(what, req, sink)) return;
  if (what == "drop-watches") {
    store_->hub().DropAll();
    return SendJson(sink, 200, ok);
  }
  if (what == "compact") {
    store_->CompactHistory();
    if (Truthy(req.Query("expireOpenWatches"))) {
      store_->hub().ExpireAll(faults_.watch_expiry_style() == FaultInjector::ExpiryStyle::kErrorEvent);
    }
    return SendJson(sink, 200, {{"ok", true}, {"compactedResourceVersion", std::to_string(store_->hub().compacted_rv())}});
  }
  if (what == "client-cert") {
    std::vector<std::string> groups;
    std::stringstream gs(req.Query("groups"));
    for (std::string g; std::getline(gs, g, ',');) {
      if (!g.empty()) groups.push_back(g);
    }
    auto cert = IssueClientCert(options_.ca, req.Query("user"), groups);
    if (!cert.ok()) return SendError(sink, cert.status());
    return SendJson(sink, 200, {{"certificate", cert->cert_pem}, {"key", cert->key_pem},
                                {"ca", options_.ca.cert_pem}});
  }
  if (what == "restart") {
    if (!restart_hook_) return SendError(sink, BadRequest("restart is not available"));
    SendJson(sink, 202, {{"restarting", true}});
    restart_hook_();
    return;
  }
  SendError(sink, PathNotFound());
}

}  // namespace kubelocal
