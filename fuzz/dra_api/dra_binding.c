/* SPDX-License-Identifier: MIT */
/* tools/kdpctl/dra_binding.c for fuzz_dra_api: compiled through this file so that the
 * compilation database holds one command per source (clang-tidy runs every
 * command of a file in one process, and its analyzer then misreports). */
#include "../../tools/kdpctl/dra_binding.c"
