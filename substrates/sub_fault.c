/* sub_fault.c — the fault backend (being written; see substrates/sub.h). */
#include "sub.h"
#include <errno.h>
#include <stdio.h>
int sub_fault_open(const char *spec, sub_vfs **out, char *err, size_t errlen)
{
	(void)out;
	snprintf(err, errlen, "%s: the fault backend is not available in this build", spec);
	return -EPROTONOSUPPORT;
}
