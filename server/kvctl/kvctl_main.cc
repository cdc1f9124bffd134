// kvctl: the command-line client of `kvserve serve`.
#include <cstdio>
#include <cstring>
#include <string>

#include "server/kvctl/kvctl_channel.h"
#include "server/kvctl/kvctl_commands.h"

namespace {

void PrintUsage() {
  std::fprintf(stderr,
               "usage: kvctl <command> [flags]\n"
               "commands:\n"
               "  generate  --prompt TEXT [--stream] [--max-new-tokens N] [--temperature T] ... (--help for all)\n"
               "  tokenize  --text TEXT\n"
               "  info      the served model and limits\n"
               "  health    [--wait SECONDS]: exit 0 when SERVING\n"
               "  bench     [--clients 16] [--requests 200] [--stream]: requests/s of 1-token generations\n"
               "  top       [--metrics HOST:9400] [--interval 1]: live KV memory, queue and tokens/s\n"
               "%s",
               kvserve::kvctl::kConnectionUsage);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  std::string name = "kvctl " + cmd;  // what each command's --help names it
  argv[1] = name.data();
  if (cmd == "generate") return kvserve::kvctl::RunGenerate(argc - 1, argv + 1);
  if (cmd == "tokenize") return kvserve::kvctl::RunTokenize(argc - 1, argv + 1);
  if (cmd == "info") return kvserve::kvctl::RunInfo(argc - 1, argv + 1);
  if (cmd == "health") return kvserve::kvctl::RunHealth(argc - 1, argv + 1);
  if (cmd == "bench") return kvserve::kvctl::RunBench(argc - 1, argv + 1);
  if (cmd == "top") return kvserve::kvctl::RunTop(argc - 1, argv + 1);
  std::fprintf(stderr, "kvctl: unknown command '%s'\n", cmd.c_str());
  PrintUsage();
  return 2;
}
