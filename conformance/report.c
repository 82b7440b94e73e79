/*
 * report.c — the JSON report (schema in docs/formats.md), the JUnit file and
 * the terminal table.  All three print the verdicts and summaries the checks
 * decided; none of them judges anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conformance/judge.h"
#include "conformance/run.h"
#include "qualify/stamp.h"

json_t *kc_report_actors(const kc_run *r)
{
	json_t *list = json_array();
	int nagents = 0;
	for (int i = 0; i < r->drv.n; i++) {
		const kc_actor *a = &r->drv.a[i];
		json_t *h = a->hello;
		json_t *id = json_object_get(h, "identity");
		json_t *one = json_pack("{s:i,s:s,s:s,s:I,s:s,s:s,s:s}", "index", i, "kind",
					a->agent[0] ? "agent" : "process", "url", a->url, "pid",
					json_integer_value(json_object_get(h, "pid")), "host",
					json_string_value(json_object_get(h, "host")) ?: "", "client",
					json_string_value(json_object_get(h, "client")) ?: "", "backend",
					json_string_value(json_object_get(id, "backend")) ?: "");
		const char *hid = json_string_value(json_object_get(h, "host_id"));
		if (hid)
			json_object_set_new(one, "host_id", json_string(hid));
		if (a->agent[0]) {
			json_object_set_new(one, "agent", json_string(a->agent));
			nagents++;
		}
		json_array_append_new(list, one);
	}
	/* The run's kind is what its actors were. */
	const char *kind = nagents == 0 ? "process" : nagents == r->drv.n ? "agent" : "mixed";
	return json_pack("{s:i,s:s,s:i,s:b,s:i,s:b,s:o}", "count", r->drv.n, "kind", kind,
			 "clients", r->clients, "distinct_clients", r->clients == r->drv.n && r->drv.n > 0,
			 "hosts", r->hosts, "distinct_hosts", r->hosts > 1, "list", list);
}

/* Class 4: what a check's sample size can catch.  A check that looks once
 * (its result does not come from sampling) says so instead. */
static json_t *detection_json(const kc_run *r, const kc_result *res)
{
	if (!res->observation)
		return json_pack("{s:s}", "kind", "single");
	double power = kc_power_of(res->observations, r->o->detect_rate);
	return json_pack("{s:s,s:s,s:I,s:f,s:f,s:f,s:I,s:b}", "kind", "sampled", "observation",
			 res->observation, "observations", (json_int_t)res->observations, "rate",
			 r->o->detect_rate, "power", round(power * 1e9) / 1e9, "target_power",
			 round(r->o->detect_power * 1e9) / 1e9,
			 "needed", (json_int_t)kc_power_needed(r->o->detect_rate, r->o->detect_power),
			 "meets_target", power >= r->o->detect_power);
}

int kc_report_power_text(const kc_run *r, const kc_result *res, char *buf, size_t len)
{
	if (!res->observation || res->verdict == KC_ERROR)
		return snprintf(buf, len, "-");
	double p = kc_power_of(res->observations, r->o->detect_rate) * 100.0;
	/* Never round a power below the target up to it. */
	double shown = p >= 99.995 ? 99.99 : (double)(int64_t)(p * 100.0) / 100.0;
	return snprintf(buf, len, "%.2f%%", shown);
}

static json_t *check_json(const kc_run *r, const kc_result *res)
{
	json_t *c = json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:O,s:I,s:O,s:O,s:O}", "name",
			      kc_check_name(res->check), "guarantee", kc_check_guarantee(res->check),
			      "verdict", kc_verdict_name(res->verdict), "summary", res->summary,
			      "duration_ms", (json_int_t)res->duration_ms, "iterations",
			      (json_int_t)res->iterations, "counts", res->counts, "anomalies_total",
			      (json_int_t)res->anomalies_total, "anomalies", res->anomalies, "notes",
			      res->notes, "profile", res->profile);
	json_object_set_new(c, "detection", detection_json(r, res));
	if (res->reproduce[0])
		json_object_set_new(c, "reproduce", json_string(res->reproduce));
	char *cmd = kc_reproduce_command(r, res);
	if (cmd)
		json_object_set_new(c, "reproduce_command", json_string(cmd));
	free(cmd);
	if (res->verdict == KC_ERROR)
		json_object_set_new(c, "error", json_string(res->error));
	return c;
}

json_t *kc_report_json(const kc_run *r)
{
	json_t *mounts = json_array();
	for (int i = 0; i < r->o->nmounts; i++)
		json_array_append_new(mounts, json_string(r->o->mounts[i]));
	json_t *ident = kq_identity_json(&r->ident);
	json_t *sub = json_pack("{s:s,s:o,s:o}", "url", r->o->url, "mounts", mounts, "identity", ident);
	json_t *checks = json_array();
	for (int k = 0; k < r->nran; k++)
		json_array_append_new(checks, check_json(r, &r->res[r->order[k]]));
	json_t *j = json_pack("{s:i,s:s,s:s,s:s,s:i,s:o,s:o,s:I,s:I,s:s,s:I,s:o}", "schema_version",
			      KC_REPORT_SCHEMA, "tool", "kaas-conform", "tool_version", KC_VERSION,
			      "verdict", kc_verdict_name(r->verdict), "exit_code",
			      kc_run_exit_code(r), "substrate", sub, "actors",
			      r->actors ? json_incref(r->actors) : kc_report_actors(r), "seed", (json_int_t)r->seed, "iterations",
			      (json_int_t)r->o->iterations, "started_at", r->started_at, "duration_ms",
			      (json_int_t)r->duration_ms, "checks", checks);
	json_object_set_new(j, "detection",
			    json_pack("{s:f,s:f,s:I}", "rate", round(r->o->detect_rate * 1e9) / 1e9,
				      "target_power", round(r->o->detect_power * 1e9) / 1e9, "needed",
				      (json_int_t)kc_power_needed(r->o->detect_rate, r->o->detect_power)));
	if (r->verdict == KC_ERROR)
		json_object_set_new(j, "error", json_string(r->error));
	json_object_set_new(j, "durability", kc_run_durability(r));
	json_t *cleanup = json_pack("{s:b}", "ok", !r->scratch_left[0]);
	if (r->scratch_left[0]) {
		json_object_set_new(cleanup, "left", json_string(r->scratch_left));
		json_object_set_new(cleanup, "error", json_string(r->cleanup_error));
	}
	/* Other runs' scratch directories found at the start: removed when
	 * provably dead, else named with their age (scratch.h). */
	json_object_set_new(cleanup, "leftovers", r->leftovers ? json_incref(r->leftovers) : json_array());
	json_object_set_new(j, "cleanup", cleanup);
	if (r->cluster_preflight)
		json_object_set_new(j, "cluster_dir", json_incref(r->cluster_preflight));
	return j;
}

/* The temp file a report is written through, beside it. */
static int temp_name(const char *path, char *tmp, size_t len)
{
	int n = snprintf(tmp, len, "%s.tmp.%d", path, (int)getpid());
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int kc_report_probe(const char *opt, const char *path, char *err, size_t errlen)
{
	if (strcmp(path, "-") == 0)
		return 0;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: %s is a directory", opt, path);
		return -EISDIR;
	}
	char tmp[4200];
	int rc = temp_name(path, tmp, sizeof(tmp)), fd = -1;
	if (rc == 0 && (fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
		rc = -errno;
	if (rc) {
		snprintf(err, errlen, "%s: cannot write %s: %s", opt, path, strerror(-rc));
		return rc;
	}
	close(fd);
	unlink(tmp);
	return 0;
}

/* Writes through a temp file and a rename, so a reader (CI) never sees half
 * a report.  A path that names something other than a regular file (a
 * device such as /dev/null, a FIFO, /dev/stdout) is written in place: a
 * rename would replace the device node with a regular file. */
static int write_text_file(const char *path, const char *text, char *err, size_t errlen)
{
	if (strcmp(path, "-") == 0) {
		fputs(text, stdout);
		fflush(stdout);
		return 0;
	}
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		FILE *f = fopen(path, "we");
		int bad = !f || fputs(text, f) < 0;
		if (f)
			bad |= fclose(f) != 0;
		if (bad) {
			int e = errno ? errno : EIO;
			snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
			return -e;
		}
		return 0;
	}
	char tmp[4200];
	if (temp_name(path, tmp, sizeof(tmp))) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	FILE *f = fopen(tmp, "we");
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
		return -e;
	}
	int bad = fputs(text, f) < 0;
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, path) != 0) {
		int e = errno ? errno : EIO;
		unlink(tmp);
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
		return -e;
	}
	return 0;
}

int kc_report_write_json(const kc_run *r, const char *path, char *err, size_t errlen)
{
	json_t *j = kc_report_json(r);
	char *s = json_dumps(j, JSON_INDENT(2));
	json_decref(j);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	size_t n = strlen(s);
	char *t = realloc(s, n + 2);
	if (!t) {
		free(s);
		return -ENOMEM;
	}
	t[n] = '\n';
	t[n + 1] = '\0';
	int rc = write_text_file(path, t, err, errlen);
	free(t);
	return rc;
}

/* XML text escaping into a growing buffer. */
typedef struct xbuf {
	char *p;
	size_t len, cap;
	int oom;
} xbuf;

static void xput(xbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t nc = (b->cap ? b->cap * 2 : 4096) + n;
		char *np = realloc(b->p, nc);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void xraw(xbuf *b, const char *s)
{
	xput(b, s, strlen(s));
}

static void xesc(xbuf *b, const char *s)
{
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		switch (c) {
		case '<':
			xraw(b, "&lt;");
			break;
		case '>':
			xraw(b, "&gt;");
			break;
		case '&':
			xraw(b, "&amp;");
			break;
		case '"':
			xraw(b, "&quot;");
			break;
		default:
			if (c < 0x20 && c != '\n' && c != '\t')
				xraw(b, "?");
			else
				xput(b, s, 1);
		}
	}
}

static void xfmt(xbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void xfmt(xbuf *b, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	xraw(b, tmp);
}

/* Appends s as one shell word: bare when it holds only characters no shell
 * treats specially, else single-quoted (a quote inside becomes '\''). */
static void shell_word(xbuf *b, const char *s)
{
	if (b->len)
		xraw(b, " ");
	if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
			    "@%+=:,./_-") == strlen(s)) {
		xraw(b, s);
		return;
	}
	xraw(b, "'");
	for (const char *q; (q = strchr(s, '\'')); s = q + 1) {
		xput(b, s, (size_t)(q - s));
		xraw(b, "'\\''");
	}
	xraw(b, s);
	xraw(b, "'");
}

char *kc_reproduce_command(const kc_run *r, const kc_result *res)
{
	if (!res->reproduce[0])
		return NULL;
	const kc_opts *o = r->o;
	char num[32];
	xbuf b = {0};
	shell_word(&b, "kaas-conform");
	shell_word(&b, "check");
	shell_word(&b, o->url);
	for (int i = 0; i < o->nmounts; i++) {
		shell_word(&b, "--mount");
		shell_word(&b, o->mounts[i]);
	}
	for (int i = 0; i < o->nagents; i++) {
		shell_word(&b, "--agent");
		shell_word(&b, o->agents[i]);
	}
	if (!o->nagents) {
		shell_word(&b, "--actors");
		snprintf(num, sizeof(num), "%d", o->actors);
		shell_word(&b, num);
	}
	shell_word(&b, "--iterations");
	snprintf(num, sizeof(num), "%lld", (long long)o->iterations);
	shell_word(&b, num);
	shell_word(&b, "--seed");
	snprintf(num, sizeof(num), "%llu", (unsigned long long)r->seed);
	shell_word(&b, num);
	shell_word(&b, "--checks");
	shell_word(&b, kc_check_name(res->check));
	if (res->check == KC_CHK_PERF) {
		snprintf(num, sizeof(num), "%.3f", (double)o->perf_fsync_p99_us / 1000.0);
		shell_word(&b, "--perf-fsync-p99-ms");
		shell_word(&b, num);
		if (o->perf_min_mibps > 0) {
			snprintf(num, sizeof(num), "%g", o->perf_min_mibps);
			shell_word(&b, "--perf-min-mibps");
			shell_word(&b, num);
		}
		if (o->perf_strict)
			shell_word(&b, "--perf-strict");
	}
	if (res->check == KC_CHK_ENOSPC) {
		snprintf(num, sizeof(num), "%lld", (long long)o->enospc_limit);
		shell_word(&b, "--enospc");
		shell_word(&b, num);
	}
	if (o->crash_cmd && res->check == KC_CHK_FSYNC) {
		shell_word(&b, "--crash-cmd");
		shell_word(&b, o->crash_cmd);
	}
	if (o->power_loss_cmd && res->check == KC_CHK_FSYNC) {
		shell_word(&b, "--power-loss-cmd");
		shell_word(&b, o->power_loss_cmd);
	}
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

static void anomalies_text(xbuf *b, const kc_result *res)
{
	size_t i;
	json_t *a;
	json_array_foreach(res->anomalies, i, a)
	{
		const char *var = json_string_value(json_object_get(a, "variant"));
		char head[400];
		snprintf(head, sizeof(head), "%s%s%sactor %lld iteration %lld: %s: ", var ? "[" : "",
			 var ? var : "", var ? "] " : "",
			 (long long)json_integer_value(json_object_get(a, "actor")),
			 (long long)json_integer_value(json_object_get(a, "iteration")),
			 json_string_value(json_object_get(a, "kind")));
		xesc(b, head);
		xesc(b, json_string_value(json_object_get(a, "detail")));
		xraw(b, "\n");
		size_t k;
		json_t *t;
		json_array_foreach(json_object_get(a, "trace"), k, t)
		{
			xraw(b, "    ");
			xesc(b, json_string_value(t));
			xraw(b, "\n");
		}
	}
}

int kc_report_write_junit(const kc_run *r, const char *path, char *err, size_t errlen)
{
	xbuf b = {0};
	int fails = 0, errors = 0;
	int64_t total_ms = 0;
	for (int k = 0; k < r->nran; k++) {
		const kc_result *res = &r->res[r->order[k]];
		fails += res->verdict == KC_FAIL || res->verdict == KC_REFUSED;
		errors += res->verdict == KC_ERROR;
		total_ms += res->duration_ms;
	}
	/* A scratch directory left behind is one more test case, in error. */
	int tests = r->nran + (r->scratch_left[0] != 0);
	errors += r->scratch_left[0] != 0;
	xraw(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	xfmt(&b, "<testsuites tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"%.3f\">\n", tests,
	     fails, errors, (double)total_ms / 1000.0);
	xraw(&b, "  <testsuite name=\"kaas-conform ");
	xesc(&b, r->o->url);
	xfmt(&b, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"0\" time=\"%.3f\" timestamp=\"",
	     tests, fails, errors, (double)total_ms / 1000.0);
	xesc(&b, r->started_at);
	xraw(&b, "\">\n    <properties>\n");
	xfmt(&b, "      <property name=\"seed\" value=\"%llu\"/>\n", (unsigned long long)r->seed);
	xfmt(&b, "      <property name=\"actors\" value=\"%d\"/>\n", r->nactors);
	xfmt(&b, "      <property name=\"verdict\" value=\"%s\"/>\n", kc_verdict_name(r->verdict));
	xfmt(&b, "      <property name=\"detect_rate\" value=\"%g\"/>\n", r->o->detect_rate);
	xfmt(&b, "      <property name=\"detect_power\" value=\"%g\"/>\n", r->o->detect_power);
	xraw(&b, "    </properties>\n");
	for (int k = 0; k < r->nran; k++) {
		const kc_result *res = &r->res[r->order[k]];
		xfmt(&b, "    <testcase classname=\"kaas-conform\" name=\"%s\" time=\"%.3f\">\n",
		     kc_check_name(res->check), (double)res->duration_ms / 1000.0);
		char pw[32];
		kc_report_power_text(r, res, pw, sizeof(pw));
		xraw(&b, "      <properties>\n        <property name=\"guarantee\" value=\"");
		xesc(&b, kc_check_guarantee(res->check));
		xfmt(&b, "\"/>\n        <property name=\"detection_power\" value=\"%s\"/>\n", pw);
		if (res->observation)
			xfmt(&b, "        <property name=\"observations\" value=\"%lld\"/>\n",
			     (long long)res->observations);
		xraw(&b, "      </properties>\n");
		if (res->verdict == KC_PASS) {
			xraw(&b, "    </testcase>\n");
			continue;
		}
		const char *tag = res->verdict == KC_ERROR					 ? "error"
				  : res->verdict == KC_WARN || res->verdict == KC_UNPROVEN ? "system-out"
											   : "failure";
		if (strcmp(tag, "system-out") == 0) {
			xfmt(&b, "      <system-out>%s: ", kc_verdict_name(res->verdict));
			xesc(&b, res->summary);
			xraw(&b, "\n");
			anomalies_text(&b, res);
			xraw(&b, "</system-out>\n");
		} else {
			xfmt(&b, "      <%s type=\"%s\" message=\"", tag, kc_verdict_name(res->verdict));
			xesc(&b, res->summary);
			xraw(&b, "\">");
			xesc(&b, kc_check_guarantee(res->check));
			xraw(&b, ": ");
			xesc(&b, res->summary);
			xraw(&b, "\n");
			anomalies_text(&b, res);
			char *cmd = kc_reproduce_command(r, res);
			if (cmd) {
				xraw(&b, "reproduce with: ");
				xesc(&b, cmd);
				xraw(&b, "\n");
			}
			free(cmd);
			xfmt(&b, "</%s>\n", tag);
		}
		xraw(&b, "    </testcase>\n");
	}
	if (r->scratch_left[0]) {
		xraw(&b, "    <testcase classname=\"kaas-conform\" name=\"cleanup\" time=\"0.000\">\n"
			 "      <error type=\"ERROR\" message=\"cannot remove the scratch directory ");
		xesc(&b, r->scratch_left);
		xraw(&b, ": ");
		xesc(&b, r->cleanup_error);
		xraw(&b, "\">left on the volume: ");
		xesc(&b, r->scratch_left);
		xraw(&b, " (");
		xesc(&b, r->cleanup_error);
		xraw(&b, "); remove it by hand\n</error>\n    </testcase>\n");
	}
	xraw(&b, "  </testsuite>\n</testsuites>\n");
	if (!b.p || b.oom) {
		free(b.p);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = write_text_file(path, b.p, err, errlen);
	free(b.p);
	return rc;
}

static void print_anomalies(FILE *out, const kc_result *res, int max)
{
	size_t i;
	json_t *a;
	json_array_foreach(res->anomalies, i, a)
	{
		if ((int)i >= max)
			break;
		const char *var = json_string_value(json_object_get(a, "variant"));
		fprintf(out, "    %s%s%sactor %lld, iteration %lld, %s: %s\n", var ? "[" : "",
			var ? var : "", var ? "] " : "",
			(long long)json_integer_value(json_object_get(a, "actor")),
			(long long)json_integer_value(json_object_get(a, "iteration")),
			json_string_value(json_object_get(a, "kind")),
			json_string_value(json_object_get(a, "detail")));
		size_t k;
		json_t *t;
		json_array_foreach(json_object_get(a, "trace"), k, t)
			fprintf(out, "        %s\n", json_string_value(t));
	}
}

void kc_report_table(const kc_run *r, FILE *out)
{
	/* Per check: the guarantee, the verdict, the detection power of its
	 * sample (an anomaly in --detect-rate of the observations caught with
	 * this probability; "-" for a check that looks once), and under it
	 * the evidence. */
	fprintf(out, "\n%-12s %-8s %7s  %-7s  %s\n", "CHECK", "VERDICT", "TIME", "POWER",
		"GUARANTEE / EVIDENCE");
	for (int k = 0; k < r->nran; k++) {
		const kc_result *res = &r->res[r->order[k]];
		char pw[32];
		kc_report_power_text(r, res, pw, sizeof(pw));
		fprintf(out, "%-12s %-8s %6.1fs  %-7s  %s\n", kc_check_name(res->check),
			kc_verdict_name(res->verdict), (double)res->duration_ms / 1000.0, pw,
			kc_check_guarantee(res->check));
		fprintf(out, "%41s-> %s\n", "", res->summary);
	}
	fprintf(out, "power: the chance that an anomaly in %g%% of a check's observations shows in this run (target %g%%)\n",
		r->o->detect_rate * 100, r->o->detect_power * 100);
	for (int k = 0; k < r->nran; k++) {
		const kc_result *res = &r->res[r->order[k]];
		if (res->verdict == KC_PASS)
			continue;
		fprintf(out, "\n%s: %s (%s)\n", kc_check_name(res->check), kc_verdict_name(res->verdict),
			kc_check_guarantee(res->check));
		if (res->verdict == KC_ERROR)
			fprintf(out, "  error: %s\n", res->error);
		if (json_array_size(res->anomalies) > 0) {
			fprintf(out, "  first anomalies (%zu shown of %lld):\n",
				json_array_size(res->anomalies) < 3 ? json_array_size(res->anomalies) : 3,
				(long long)res->anomalies_total);
			print_anomalies(out, res, 3);
		}
		if (res->check == KC_CHK_PREFLIGHT) {
			size_t i;
			json_t *f;
			json_array_foreach(json_object_get(res->profile, "findings"), i, f)
				fprintf(out, "  %s: %s\n", json_string_value(json_object_get(f, "level")),
					json_string_value(json_object_get(f, "explain")));
		}
		size_t i;
		json_t *n;
		json_array_foreach(res->notes, i, n)
			fprintf(out, "  note: %s\n", json_string_value(n));
		char *cmd = kc_reproduce_command(r, res);
		if (cmd)
			fprintf(out, "  reproduce: %s\n", cmd);
		free(cmd);
	}
	if (r->scratch_left[0])
		fprintf(out, "\ncleanup: ERROR (the scratch directory could not be removed)\n  left: %s\n  error: %s\n"
			     "  it holds nothing of value: remove it by hand\n",
			r->scratch_left, r->cleanup_error);
	fflush(out);
}

void kc_report_final(const kc_run *r, int status, const char *why, FILE *out)
{
	fprintf(out, "\nVERDICT %s (exit %d", kc_verdict_name(r->verdict), status);
	if (status != kc_run_exit_code(r) && why && *why)
		fprintf(out, ": %s", why);
	fprintf(out, ")");
	if (r->report_path[0])
		fprintf(out, "  report: %s", r->report_path);
	if (r->res[KC_CHK_FSYNC].ran && r->verdict != KC_ERROR) {
		json_t *d = kc_run_durability(r);
		fprintf(out, "  durability: %s%s", json_string_value(json_object_get(d, "statement")),
			r->o->require_power_loss && !json_is_true(json_object_get(d, "proven"))
				? " (--require-power-loss: not qualified)"
				: "");
		json_decref(d);
	}
	fprintf(out, "\n");
	fflush(out);
}
