/*
 * cworker is the demo worker's protocol (package demoworker) in C, for the
 * handoff benchmark: a CMD whose own start takes well under a millisecond,
 * where a Go program's runtime start takes several, so that what the
 * benchmark measures is tenure. It takes --events PATH --lock PATH
 * [--exit-after Nms]; it appends "start ID TERM MONO PID ok|overlap" to
 * --events at start (overlap: the flock on --lock was held by another
 * worker still alive) and "stop ID TERM MONO PID" on SIGTERM, SIGINT or
 * SIGHUP or after --exit-after, then exits 0. MONO is CLOCK_MONOTONIC in
 * nanoseconds, taken first thing in main.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static long long mono(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
	long long started = mono();
	const char *events = NULL, *lock = NULL;
	long exit_ms = 0;
	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--events")) {
			events = argv[++i];
		} else if (!strcmp(argv[i], "--lock")) {
			lock = argv[++i];
		} else if (!strcmp(argv[i], "--exit-after")) {
			exit_ms = strtol(argv[++i], NULL, 10); /* "100ms": milliseconds only */
		}
	}
	if (!events || !lock) {
		fputs("cworker: --events and --lock are required\n", stderr);
		return 2;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	const char *id = getenv("TENURE_ID"), *term = getenv("TENURE_TERM");
	int lf = open(lock, O_RDWR | O_CREAT, 0600);
	int ev = open(events, O_WRONLY | O_APPEND);
	if (lf < 0 || ev < 0 || !id || !term) {
		perror("cworker");
		return 1;
	}
	const char *state = flock(lf, LOCK_EX | LOCK_NB) ? "overlap" : "ok";
	char line[512];
	int n = snprintf(line, sizeof line, "start %s %s %lld %d %s\n", id, term, started, (int)getpid(), state);
	if (write(ev, line, n) != n) {
		return 1;
	}
	if (exit_ms > 0) {
		struct timespec d = {exit_ms / 1000, (exit_ms % 1000) * 1000000L};
		sigtimedwait(&set, NULL, &d);
	} else {
		int sig;
		sigwait(&set, &sig);
	}
	n = snprintf(line, sizeof line, "stop %s %s %lld %d\n", id, term, mono(), (int)getpid());
	return write(ev, line, n) == n ? 0 : 1;
}
