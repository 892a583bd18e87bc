// A stand-in NCCL net plugin for nccl_net_test: a shared library exporting the
// entry point NCCL looks for (the value is never used by the check).
extern "C" {
__attribute__((visibility("default"))) int ncclNetPlugin_v9 = 9;
__attribute__((visibility("default"))) int ncclNetPlugin_v8 = 8;
}
