/* --net as qemu's -nic spells it: user[,hostfwd=PROTO:[ADDR]:PORT-[ADDR]:PORT][,restrict=on][,mac=MAC]. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/fail.h"

#include "backend.h"

static const uint8_t qemu_mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };

static int parse_port(const char *s, uint16_t *port)
{
    char *end;
    unsigned long n = strtoul(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || n < 1 || n > 65535)
        return -1;
    *port = (uint16_t)n;
    return 0;
}

/* ADDR:PORT with ADDR dotted IPv4 or empty (0). (s) is modified. */
static int parse_endpoint(char *s, uint32_t *addr, uint16_t *port)
{
    char *colon = strrchr(s, ':');
    if (colon == NULL)
        return -1;
    *colon = '\0';
    struct in_addr a = { 0 };
    if (*s && inet_pton(AF_INET, s, &a) != 1)
        return -1;
    *addr = a.s_addr;
    return parse_port(colon + 1, port);
}

/* tcp:[HOSTADDR]:HOSTPORT-[GUESTADDR]:GUESTPORT (udp: likewise; no protocol: tcp). */
static int parse_hostfwd(const char *value, struct net_hostfwd *f)
{
    char buf[128];
    if (snprintf(buf, sizeof buf, "%s", value) >= (int)sizeof buf)
        return -1;
    char *s = buf;
    *f = (struct net_hostfwd){ 0 };
    if (!strncmp(s, "tcp:", 4)) {
        s += 4;
    } else if (!strncmp(s, "udp:", 4)) {
        f->udp = 1;
        s += 4;
    } else if (*s == ':') {
        s += 1;
    } else {
        return -1;
    }
    char *dash = strchr(s, '-');
    if (dash == NULL)
        return -1;
    *dash = '\0';
    /* the host side may leave out its address but keeps the colon: ":2222" or "2222" */
    char host[sizeof buf + 1];
    snprintf(host, sizeof host, "%s%s", strchr(s, ':') ? "" : ":", s);
    return parse_endpoint(host, &f->host_addr, &f->host_port) ||
           parse_endpoint(dash + 1, &f->guest_addr, &f->guest_port) ? -1 : 0;
}

static int parse_mac(const char *value, uint8_t mac[6])
{
    unsigned b[6];
    char tail;
    if (sscanf(value, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
        return -1;
    for (int i = 0; i < 6; i++)
        mac[i] = (uint8_t)b[i];
    /* IEEE 802: bit 0 of the first byte makes a group (multicast) address, not a NIC's. */
    return mac[0] & 1 ? -1 : 0;
}

int net_spec_parse(const char *arg, unsigned index, struct net_spec *spec)
{
    *spec = (struct net_spec){ .kind = NET_USER };
    memcpy(spec->mac, qemu_mac, sizeof qemu_mac);
    spec->mac[5] = (uint8_t)(spec->mac[5] + index);
    size_t n = strcspn(arg, ",");
    if (strncmp(arg, "user", n) || n != 4)
        return bad_input("--net '%s': the backend is 'user' or 'none' (e.g. --net user,hostfwd=tcp::2222-:22)",
                         arg);
    for (const char *p = arg + n; *p == ','; ) {
        const char *flag = p + 1;
        size_t len = strcspn(flag, ",");
        char buf[160];
        snprintf(buf, sizeof buf, "%.*s", (int)len, flag);
        char *value = strchr(buf, '=');
        if (value)
            *value++ = '\0';
        int bad = 1;
        if (value == NULL) {
            /* every flag has a value */
        } else if (!strcmp(buf, "hostfwd")) {
            if (spec->user.nhostfwd == NET_MAX_HOSTFWD)
                return bad_input("--net '%s': more than %u hostfwd", arg, NET_MAX_HOSTFWD);
            bad = parse_hostfwd(value, &spec->user.hostfwd[spec->user.nhostfwd++]);
        } else if (!strcmp(buf, "restrict")) {
            bad = strcmp(value, "on") && strcmp(value, "off");
            spec->user.restrict_ = !strcmp(value, "on");
        } else if (!strcmp(buf, "mac")) {
            bad = parse_mac(value, spec->mac);
        } else {
            bad = 1;
        }
        if (bad)
            return bad_input("--net '%s': '%.*s' is not hostfwd=tcp|udp:[ADDR]:PORT-[ADDR]:PORT, "
                             "restrict=on|off or mac=52:54:00:xx:xx:xx", arg, (int)len, flag);
        p = flag + len;
    }
    return 0;
}
