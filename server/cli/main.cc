// The kvserve binary: dispatches to its commands generate, tokenize, bench, eval, profile and serve.
#include <cstdio>
#include <cstring>
#include <string>

namespace kvserve {
int RunGenerate(int argc, char** argv);
int RunTokenize(int argc, char** argv);
int RunBench(int argc, char** argv);
int RunEval(int argc, char** argv);
int RunProfile(int argc, char** argv);
int RunServe(int argc, char** argv);
}  // namespace kvserve

namespace {

void PrintUsage() {
  std::fprintf(stderr,
               "usage: kvserve <command> [flags]\n"
               "commands:\n"
               "  generate  --model PATH|random:PRESET --prompt TEXT|--prompt-file F [--chat] [--max-new-tokens N]\n"
               "            [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--seed S] ...\n"
               "  tokenize  --model PATH --text TEXT\n"
               "  bench     --model PATH [--prompt-tokens 512] [--new-tokens 128] [--repeats 3] [--max-context N]\n"
               "  eval      --model PATH [--policies ...] [--budgets ...] [--contexts ...] [--tasks kl,passkey,multikey]\n"
               "  profile   --model PATH --calibration FILE... --out PROFILE.json (RippleKV sensitivity)\n"
               "  serve     --model PATH [--port 50051] [--metrics-port 9400] ... (the gRPC server)\n"
               "run 'kvserve <command> --help' for every flag.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  std::string name = "kvserve " + cmd;  // what each command's --help names it
  argv[1] = name.data();
  if (cmd == "generate") return kvserve::RunGenerate(argc - 1, argv + 1);
  if (cmd == "tokenize") return kvserve::RunTokenize(argc - 1, argv + 1);
  if (cmd == "bench") return kvserve::RunBench(argc - 1, argv + 1);
  if (cmd == "eval") return kvserve::RunEval(argc - 1, argv + 1);
  if (cmd == "profile") return kvserve::RunProfile(argc - 1, argv + 1);
  if (cmd == "serve") return kvserve::RunServe(argc - 1, argv + 1);
  std::fprintf(stderr, "kvserve: unknown command '%s'\n", cmd.c_str());
  PrintUsage();
  return 2;
}
