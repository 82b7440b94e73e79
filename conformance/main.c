/*
 * main.c — kaas-conform: qualify a shared volume against the substrate
 * contract (docs/contract.md, docs/conformance.md).
 */
#include <stdio.h>
#include <string.h>

#include "conformance/agent.h"
#include "conformance/kc.h"
#include "conformance/opts.h"
#include "conformance/run.h"
#include "conformance/scratch.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(kc_usage, stderr);
		return KC_EXIT_ERROR;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "check") == 0)
		return kc_cmd_check(argc - 1, argv + 1);
	if (strcmp(cmd, "stamp-verify") == 0)
		return kc_cmd_stamp_verify(argc - 1, argv + 1);
	if (strcmp(cmd, "clean") == 0)
		return kc_cmd_clean(argc - 1, argv + 1);
	if (strcmp(cmd, "agent") == 0)
		return kc_cmd_agent(argc - 1, argv + 1);
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
		printf("kaas-conform %s (actor protocol %d, report schema %d)\n", KC_VERSION,
		       KC_PROTOCOL_VERSION, KC_REPORT_SCHEMA);
		return 0;
	}
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		fputs(kc_usage, stdout);
		return 0;
	}
	fprintf(stderr, "kaas-conform: unknown command '%s' (check, stamp-verify, clean, agent, --version)\n", cmd);
	return KC_EXIT_ERROR;
}
