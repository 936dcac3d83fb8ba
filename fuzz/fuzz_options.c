/* Fuzz target: the parsers of the user's option strings: `ring3 run`'s command line
 * (monitor/host/options.c: --disk's FILE[,readonly=on][,snapshot=on][,export=NAME] and ikc:NAME,
 * -m's size), --net (net/spec.c), the comma lists under both (lib/optlist.c) and the addresses of
 * --gdb and --monitor (lib/listen.c). Only parsed: no file or socket is opened.
 *
 * The input is text, cut into strings at each newline (or NUL). Each string goes to every parser
 * alone, then all of them form one command line. Beyond "no crash": a parse gives the same result
 * twice; what it accepts lies in the ranges options.h, backend.h, optlist.h and listen.h document
 * and agrees with the string; what it refuses gets one line "ring3: ..." on stderr and status 2. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "guest.h"
#include "ikc/channel.h"
#include "lib/fail.h"
#include "lib/listen.h"
#include "lib/optlist.h"
#include "net/backend.h"

#include "monitor/host/options.h"

#define MAX_STRINGS 12

/* What bad_input printed (fuzz_stderr_release). */
static const char *said;
static size_t said_len;

/* lib/fail.h: a refusal is exit status 2 with a message "ring3: ...", ending its line. (The
 * message quotes the user's string, which may hold newlines of its own.) */
static void check_refusal(int rc)
{
    if (rc != EXIT_BAD_INPUT || said_len < 8 || strncmp(said, "ring3: ", 7) || said[said_len - 1] != '\n')
        abort();
}

/* ---- lib/optlist.c ---- */

/* opt_decimal's contract, written out: all of (s) decimal digits, the number in [lo, hi]. */
static bool decimal_ok(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
    unsigned long n = 0;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        n = n > (hi + 9) / 10 ? hi + 1 : n * 10 + (unsigned long)(*s - '0');
    }
    *out = n;
    return n >= lo && n <= hi;
}

static void fuzz_optlist(const char *s)
{
    static const unsigned long ranges[][2] = { { 1, 65535 }, { NET_MIN_MTU, NET_MAX_MTU }, { 1, 256 } };
    struct opt_flag f;
    const char *p = s + strcspn(s, ",");

    for (const char *before = p; opt_next_flag(&p, &f); before = p) {
        /* optlist.h: the flag is the text up to the next comma, (p) moves past it to that comma,
         * KEY is its text before '=' and VALUE after, when it has one and fits the key buffer. */
        size_t len = strcspn(before + 1, ",");
        if (f.text != before + 1 || (size_t)f.len != len || p != f.text + len || (*p && *p != ','))
            abort();
        const char *eq = memchr(f.text, '=', len);
        if ((f.value != NULL) != (eq != NULL && len < sizeof f.key))
            abort();
        if (f.value && (strlen(f.key) != (size_t)(eq - f.text) || memcmp(f.key, f.text, strlen(f.key)) ||
                        strlen(f.value) != len - strlen(f.key) - 1 || memcmp(f.value, eq + 1, strlen(f.value))))
            abort();
        if (!f.value && strncmp(f.key, f.text, len < sizeof f.key ? len : sizeof f.key - 1))
            abort();
        for (size_t r = 0; f.value && r < sizeof ranges / sizeof ranges[0]; r++) {
            unsigned long got = 0, want = 0;
            int rc = opt_decimal(f.value, ranges[r][0], ranges[r][1], &got);
            if ((rc == 0) != decimal_ok(f.value, ranges[r][0], ranges[r][1], &want) || (rc == 0 && got != want))
                abort();
        }
    }
}

/* ---- lib/listen.c ---- */

/* listen.h's contract, written out: unix:PATH with a PATH a sun_path holds, or tcp:[HOST]:PORT
 * with HOST dotted IPv4 or empty and PORT from 1 to 65535. */
static bool listen_ok(const char *spec, bool tcp)
{
    if (!strncmp(spec, "unix:", 5))
        return spec[5] && strlen(spec + 5) < sizeof ((struct sockaddr_un *)0)->sun_path;
    const char *colon = strrchr(spec, ':');
    unsigned long port;
    char host[64];
    struct in_addr a;
    if (!tcp || strncmp(spec, "tcp:", 4) || colon < spec + 4 || colon - (spec + 4) >= (long)sizeof host)
        return false;
    snprintf(host, sizeof host, "%.*s", (int)(colon - (spec + 4)), spec + 4);
    /* strtol's leniency, as listen.c takes the port: spaces and a sign before the digits */
    const char *digits = colon + 1 + strspn(colon + 1, " \t\n\v\f\r");
    digits += *digits == '+';
    return decimal_ok(digits, 1, 65535, &port) && (!*host || inet_pton(AF_INET, host, &a) == 1);
}

static void fuzz_listen(const char *s)
{
    for (int tcp = 0; tcp < 2; tcp++)
        if (listen_spec_valid(s, tcp) != listen_ok(s, tcp) || listen_spec_valid(s, tcp) != listen_ok(s, tcp))
            abort();
}

/* ---- net/spec.c ---- */

static bool same_spec(const struct net_spec *a, const struct net_spec *b)
{
    if (a->kind != b->kind || memcmp(a->mac, b->mac, 6) || a->mtu != b->mtu ||
        a->user.restrict_ != b->user.restrict_ || a->user.mtu != b->user.mtu ||
        a->user.nhostfwd != b->user.nhostfwd || a->stream.server != b->stream.server ||
        strcmp(a->stream.path, b->stream.path) || strcmp(a->stream.host, b->stream.host) ||
        a->stream.port != b->stream.port || strcmp(a->tap.ifname, b->tap.ifname) ||
        strcmp(a->ikc.group, b->ikc.group))
        return false;
    for (unsigned i = 0; i < a->user.nhostfwd && i < NET_MAX_HOSTFWD; i++) {
        const struct net_hostfwd *x = &a->user.hostfwd[i], *y = &b->user.hostfwd[i];
        if (x->udp != y->udp || x->host_addr != y->host_addr || x->host_port != y->host_port ||
            x->guest_addr != y->guest_addr || x->guest_port != y->guest_port)
            return false;
    }
    return true;
}

static bool terminated(const char *s, size_t size)
{
    return memchr(s, '\0', size) != NULL;
}

static void fuzz_net(const char *s, unsigned index)
{
    static const char *const kinds[] = { [NET_USER] = "user", [NET_STREAM] = "stream", [NET_TAP] = "tap",
                                         [NET_IKC] = "ikc" };
    static struct net_spec a, b;
    fuzz_stderr_catch();
    int rc = net_spec_parse(s, index, &a), again = net_spec_parse(s, index, &b);
    said = fuzz_stderr_release(&said_len);
    if (rc != again)
        abort();
    if (rc) {
        check_refusal(rc);
        return;
    }
    if (said_len || !same_spec(&a, &b))
        abort();
    /* backend.h: the kind the string starts with; an MTU from 68 to 65520, user's its own; a
     * unicast MAC; at most 8 forwards, with ports; a stream on a path or a port, not both; a TAP
     * device's name and an IKC group's as their fields hold them. */
    size_t n = strcspn(s, ",");
    if (a.kind > NET_IKC || strlen(kinds[a.kind]) != n || strncmp(s, kinds[a.kind], n) ||
        a.mtu < NET_MIN_MTU || a.mtu > NET_MAX_MTU || a.user.mtu != a.mtu || (a.mac[0] & 1) ||
        a.user.nhostfwd > NET_MAX_HOSTFWD)
        abort();
    for (unsigned i = 0; i < a.user.nhostfwd; i++)
        if (a.kind != NET_USER || !a.user.hostfwd[i].host_port || !a.user.hostfwd[i].guest_port ||
            a.user.hostfwd[i].udp > 1)
            abort();
    const struct net_stream_options *o = &a.stream;
    if (!terminated(o->path, sizeof o->path) || !terminated(o->host, sizeof o->host) ||
        !terminated(a.tap.ifname, sizeof a.tap.ifname) || !terminated(a.ikc.group, sizeof a.ikc.group))
        abort();
    if (a.kind == NET_STREAM && (!o->path[0] == !o->port || (o->path[0] && o->host[0]) ||
                                 (o->port && !o->host[0])))
        abort();
    if (a.kind != NET_STREAM && (o->path[0] || o->host[0] || o->port || o->server))
        abort();
    if ((a.kind == NET_TAP) != (a.tap.ifname[0] != 0))
        abort();
    if (a.ikc.group[0] && (a.kind != NET_IKC || !ikc_name_ok(a.ikc.group)))
        abort();
}

/* ---- monitor/host/options.c ---- */

static struct r3_options opts;

/* What parse_disk allocated and the options keep: theirs to free, not the parse's. */
static void free_disks(void)
{
    for (unsigned i = 0; i < opts.ndisks && i < OPTIONS_MAX_DISKS; i++)
        free((char *)(opts.disks[i].served ? opts.disks[i].served - 4 : opts.disks[i].path));
    for (unsigned i = 0; i < opts.nexports && i < OPTIONS_MAX_DISKS; i++) {
        free((char *)opts.exports[i].path);
        free((char *)opts.exports[i].export_name);
    }
}

/* The last (key)=on|off of the flags after the file in (s): 1, 0, or (dflt) when none. */
static int last_switch(const char *s, const char *key, int dflt)
{
    struct opt_flag f;
    const char *p = s + strcspn(s, ",");
    while (opt_next_flag(&p, &f))
        if (f.value && !strcmp(f.key, key))
            dflt = !strcmp(f.value, "on") || !strcmp(f.value, "true") || !strcmp(f.value, "yes");
    return dflt;
}

/* options.h: a run gets 16M to 16G of whole pages, at most 4 disks and NICs, 1 to 256 stubs,
 * listen addresses that are valid. */
static void check_options(int rc)
{
    if (rc != OPTIONS_RUN && rc != 0)
        check_refusal(rc);
    if (rc != OPTIONS_RUN)
        return;
    if (said_len || opts.mem_size < GM_MIN_SIZE || opts.mem_size > GM_MAX_SIZE ||
        opts.mem_size % GM_PAGE_SIZE || opts.ndisks > OPTIONS_MAX_DISKS ||
        opts.nexports > OPTIONS_MAX_DISKS || opts.nnets > OPTIONS_MAX_NICS ||
        (opts.nnets == 0) != opts.net_none || opts.stubs < 1 || opts.stubs > OPTIONS_MAX_STUBS ||
        !opts.kernel || (opts.gdb && !listen_spec_valid(opts.gdb, true)) ||
        (opts.monitor && !listen_spec_valid(opts.monitor, false)))
        abort();
    for (unsigned i = 0; i < opts.ndisks; i++)
        if (!opts.disks[i].path == !opts.disks[i].served || opts.disks[i].export_name ||
            (opts.disks[i].path && !opts.disks[i].path[0]) ||
            (opts.disks[i].served && (!ikc_name_ok(opts.disks[i].served) || opts.disks[i].snapshot)))
            abort();
    for (unsigned i = 0; i < opts.nexports; i++)
        if (!opts.exports[i].path || opts.exports[i].served || !ikc_name_ok(opts.exports[i].export_name))
            abort();
}

/* --disk (s) alone, with the group a served disk needs and a kernel. */
static void fuzz_disk(char *s)
{
    char *argv[] = { "run", "--ikc", "g", "--disk", s, "k", NULL };
    fuzz_stderr_catch();
    int rc = options_parse(6, argv, &opts);
    said = fuzz_stderr_release(&said_len);
    check_options(rc);
    if (rc == OPTIONS_RUN) {
        /* The file is the text before the first comma; ikc:NAME serves NAME; the flags as given. */
        size_t n = strcspn(s, ",");
        const struct disk_spec *d = opts.ndisks ? &opts.disks[0] : &opts.exports[0];
        const char *file = d->served ? d->served - 4 : d->path;
        if (opts.ndisks + opts.nexports != 1 || strlen(file) != n || strncmp(file, s, n) ||
            (d->served != NULL) != !strncmp(s, "ikc:", 4) ||
            d->readonly != last_switch(s, "readonly", 0) ||
            (!d->served && d->snapshot != last_switch(s, "snapshot", 0)))
            abort();
    }
    free_disks();
}

/* -m (s): options_parse_size alone, then through the command line. */
static void fuzz_size(char *s)
{
    uint64_t a = 1, b = 2;
    int rc = options_parse_size(s, &a);
    if (rc != options_parse_size(s, &b) || (rc == 0 && (a != b || a % GM_PAGE_SIZE)) || (rc && rc != -1))
        abort();
    /* A whole number of a unit (MiB without one) is exactly that many bytes, rounded to pages. */
    unsigned long n;
    size_t digits = strspn(s, "0123456789");
    const char *unit = s + digits;
    char num[12];
    if (rc == 0 && digits && digits < 10 && strlen(unit) <= 1 && strchr("BbKkMmGgTt", *unit)) {
        snprintf(num, sizeof num, "%.*s", (int)digits, s);
        if (decimal_ok(num, 0, 999999999, &n)) {
            int shift = *unit == 0 ? 20 : strchr("Bb", *unit) ? 0 : strchr("Kk", *unit) ? 10 :
                        strchr("Mm", *unit) ? 20 : strchr("Gg", *unit) ? 30 : 40;
            unsigned __int128 want = (((unsigned __int128)n << shift) + GM_PAGE_SIZE - 1) &
                                     ~(unsigned __int128)(GM_PAGE_SIZE - 1);
            if (want > UINT64_MAX)
                want = UINT64_MAX & ~(GM_PAGE_SIZE - 1ull);     /* saturated */
            if (a != want)
                abort();
        }
    }
    char *argv[] = { "run", "-m", s, "k", NULL };
    fuzz_stderr_catch();
    rc = options_parse(4, argv, &opts);
    said = fuzz_stderr_release(&said_len);
    check_options(rc);
    free_disks();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *strings[MAX_STRINGS], *argv[MAX_STRINGS + 2];
    int n = 0;

    /* Each string in a buffer of its own size, so that reading past its end is seen. */
    for (size_t at = 0; at <= size && n < MAX_STRINGS; ) {
        size_t len = 0;
        while (at + len < size && data[at + len] != '\n' && data[at + len] != '\0')
            len++;
        if (!(strings[n] = malloc(len + 1)))
            abort();
        memcpy(strings[n], data + at, len);
        strings[n++][len] = '\0';
        at += len + 1;
    }
    for (int i = 0; i < n; i++) {
        fuzz_optlist(strings[i]);
        fuzz_listen(strings[i]);
        fuzz_net(strings[i], (unsigned)i % OPTIONS_MAX_NICS);
        fuzz_disk(strings[i]);
        fuzz_size(strings[i]);
    }
    /* All of them as one command line (getopt may reorder argv, not the strings). */
    argv[0] = "run";
    memcpy(argv + 1, strings, (size_t)n * sizeof *argv);
    argv[n + 1] = NULL;
    fuzz_stderr_catch();
    int rc = options_parse(n + 1, argv, &opts);
    said = fuzz_stderr_release(&said_len);
    check_options(rc);
    free_disks();
    for (int i = 0; i < n; i++)
        free(strings[i]);
    return 0;
}
