// HTTP API of the local control plane: authentication, fault injection,
// discovery, resource verbs (get/list/watch/create/update/patch/delete/
// deletecollection, status subresources), Table printing and the admin
// endpoints under /_local/. Transport-neutral: see http_types.h.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "localcluster/apiserver/certs.h"
#include "localcluster/apiserver/faults.h"
#include "localcluster/apiserver/garbage_collector.h"
#include "localcluster/apiserver/http_types.h"
#include "localcluster/apiserver/object_ops.h"
#include "localcluster/apiserver/resources.h"
#include "localcluster/apiserver/store.h"

namespace kubelocal {

struct ApiServerOptions {
  std::string token;           // bearer token accepted for every request
  std::string server_address;  // host:port reported by /api
  std::chrono::milliseconds bookmark_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds gc_period{std::chrono::seconds(1)};
  int max_watch_seconds = 1800;
  CertKey ca;  // issues client certificates for /_local/client-cert
};

struct WatchRequest;  // the parameters of a watch (api_watch.cc)

class ApiServer {
 public:
  ApiServer(Store* store, ApiServerOptions options);
  ~ApiServer();
  // Registers stored CRDs, creates default namespaces, starts the GC.
  Status Start();
  // Ends watches and the GC; in-flight handlers finish.
  void Stop();

  void Handle(const HttpRequest& req, ResponseSink& sink);

  // Called (once) when POST /_local/restart asks for a restart.
  void SetRestartHook(std::function<void()> hook) { restart_hook_ = std::move(hook); }
  FaultInjector& faults() { return faults_; }
  ObjectOps& ops() { return ops_; }
  Registry& registry() { return registry_; }

 private:
  struct Target {  // parsed resource path
    ResourceType type;
    std::string ns, name, sub;
  };
  void HandleResource(const HttpRequest& req, ResponseSink& sink, const Target& t);
  void HandleBinding(const HttpRequest& req, ResponseSink& sink, const Target& t);
  void HandleDelete(const HttpRequest& req, ResponseSink& sink, const Target& t);
  void HandleList(const HttpRequest& req, ResponseSink& sink, const Target& t);
  // Watches (api_watch.cc).
  void HandleWatch(const HttpRequest& req, ResponseSink& sink, const Target& t);
  bool StreamEvents(ResponseSink& sink, const ResourceType& type, const WatchRequest& w, Watcher& watcher);
  void HandleAdmin(const HttpRequest& req, ResponseSink& sink);
  // The /_local/ fault-injection endpoints; false when `what` is none of them.
  bool HandleFaultEndpoint(const std::string& what, const HttpRequest& req, ResponseSink& sink);
  bool HandleNonResource(const HttpRequest& req, ResponseSink& sink);
  json OpenApiV3Root() const;
  std::optional<json> OpenApiV3Doc(const std::string& gv_path) const;
  bool Authenticated(const HttpRequest& req) const;

  Store* store_;
  const ApiServerOptions options_;
  Registry registry_;
  ObjectOps ops_;
  FaultInjector faults_;
  GarbageCollector gc_;
  std::atomic<bool> stopping_{false};
  std::function<void()> restart_hook_;
};

void SendJson(ResponseSink& sink, int code, const json& body,
              const std::map<std::string, std::string>& headers = {});
void SendError(ResponseSink& sink, const Status& e);

}  // namespace kubelocal
