// Forwards to device_form.h: kept only while server/cli/bench_command.cc includes this name
// (issue 20, part 2 owns server/); delete it with that include.
#pragma once
#include "engine/compress/device_form.h"
