// A stand-in rank for launch_test: records its pid and env, then behaves as
// its flags say. Self-bounded: exits by itself after 30 s at most.
//   launch_test_rank DIR [--fail-rank R --fail-code C --fail-after-ms M]
//                        [--ignore-term-rank R] [--grandchild] [--exit-after-ms M]
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

std::string g_dir;
int g_rank = -1;

void WriteFile(const std::string& name, const std::string& text) {
  const std::string path = g_dir + "/rank" + std::to_string(g_rank) + "." + name;
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return;
  std::fputs(text.c_str(), f);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

volatile sig_atomic_t g_term = 0;
void OnTerm(int) { g_term = 1; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  g_dir = argv[1];
  const char* rank_s = std::getenv("RANK");  // raw getenv: a test binary reporting the env it was given
  g_rank = rank_s ? std::atoi(rank_s) : -1;
  int fail_rank = -1, fail_code = 0, fail_after = 0, ignore_term_rank = -1, exit_after = 30000;
  bool grandchild = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--fail-rank") fail_rank = next();
    else if (a == "--fail-code") fail_code = next();
    else if (a == "--fail-after-ms") fail_after = next();
    else if (a == "--ignore-term-rank") ignore_term_rank = next();
    else if (a == "--exit-after-ms") exit_after = next();
    else if (a == "--grandchild") grandchild = true;
  }
  std::string env;
  for (const char* k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "NNODES",
                        "NPROC_PER_NODE", "MASTER_ADDR", "MASTER_PORT", "PET_NNODES"}) {
    const char* v = std::getenv(k);
    env += std::string(k) + "=" + (v ? v : "") + "\n";
  }
  WriteFile("env", env);
  if (g_rank == ignore_term_rank) {
    signal(SIGTERM, SIG_IGN);
  } else {
    signal(SIGTERM, OnTerm);
    signal(SIGINT, OnTerm);
  }
  if (grandchild) {
    const pid_t c = fork();
    if (c == 0) {
      for (int i = 0; i < 300; ++i) usleep(100 * 1000);  // bounded: 30 s
      _exit(0);
    }
    WriteFile("grandchild", std::to_string(c));
  }
  WriteFile("pid", std::to_string(getpid()));
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start).count();
    if (g_term) {
      WriteFile("term", "SIGTERM");
      return 143;
    }
    if (g_rank == fail_rank && ms >= fail_after) return fail_code;
    if (ms >= exit_after) return 0;
    usleep(5 * 1000);
  }
}
