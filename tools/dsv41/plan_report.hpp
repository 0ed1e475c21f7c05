// The EXL3 expert plan of a Spark checkpoint as text (shared by `dsv41 exl3-plan` and `dsv41
// info`): bank roots, experts per K per layer, native experts, bytes and bits per weight, bytes per
// TP rank.
#pragma once

#include "exl3/expert_bank.hpp"

namespace dsv41::cli {

// Prints to stdout. bpw is stored bytes (trellis + suh/svh + markers) over the stored weights
// 3 · hidden · inter of each EXL3 expert (dims as stored, i.e. padded to 128).
void print_plan_report(const exl3::ExpertBank& bank, int world);

}  // namespace dsv41::cli
