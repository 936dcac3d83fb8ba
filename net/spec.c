/* --net as qemu's -nic spells it: user[,hostfwd=PROTO:[ADDR]:PORT-[ADDR]:PORT][,restrict=on][,mac=MAC],
 * stream,path=SOCKET|host=HOST,port=PORT[,server=on][,mac=MAC], or tap,ifname=NAME[,mac=MAC];
 * and ring3's own ikc,group=NAME[,mac=MAC]. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/fail.h"
#include "lib/optlist.h"

#include "backend.h"

static const uint8_t qemu_mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };

static int parse_port(const char *s, uint16_t *port)
{
    unsigned long n;
    if (opt_decimal(s, 1, 65535, &n))
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

/* host=, port=, path= and server= of --net stream. 0 when (key)=(value) is one of them. */
static int stream_flag(struct net_stream_options *o, const char *key, const char *value)
{
    if (!strcmp(key, "path"))
        return !*value || snprintf(o->path, sizeof o->path, "%s", value) >= (int)sizeof o->path;
    if (!strcmp(key, "host"))
        return !*value || snprintf(o->host, sizeof o->host, "%s", value) >= (int)sizeof o->host;
    if (!strcmp(key, "port"))
        return parse_port(value, &o->port);
    if (!strcmp(key, "server")) {
        o->server = !strcmp(value, "on");
        return strcmp(value, "on") && strcmp(value, "off");
    }
    return -1;
}

static int user_flag(struct net_user_options *o, const char *key, const char *value)
{
    if (!strcmp(key, "hostfwd"))
        return o->nhostfwd == NET_MAX_HOSTFWD ? -1 : parse_hostfwd(value, &o->hostfwd[o->nhostfwd++]);
    if (!strcmp(key, "restrict")) {
        o->restrict_ = !strcmp(value, "on");
        return strcmp(value, "on") && strcmp(value, "off");
    }
    return -1;
}

static int tap_flag(struct net_tap_options *o, const char *key, const char *value)
{
    if (!strcmp(key, "ifname"))
        return !*value || snprintf(o->ifname, sizeof o->ifname, "%s", value) >= (int)sizeof o->ifname;
    return -1;
}

static int ikc_flag(struct net_ikc_options *o, const char *key, const char *value)
{
    if (!strcmp(key, "group"))
        return !ikc_name_ok(value) ||
               snprintf(o->group, sizeof o->group, "%s", value) >= (int)sizeof o->group;
    return -1;
}

static int parse_mtu(const char *s, uint16_t *mtu)
{
    unsigned long n;
    if (opt_decimal(s, NET_MIN_MTU, NET_MAX_MTU, &n))
        return -1;
    *mtu = (uint16_t)n;
    return 0;
}

static const char *const usage[] = {
    [NET_USER] = "hostfwd=tcp|udp:[ADDR]:PORT-[ADDR]:PORT (at most 8), restrict=on|off, "
                 "mtu=68..65520 or mac=52:54:00:xx:xx:xx",
    [NET_STREAM] = "path=SOCKET, host=HOST, port=PORT, server=on|off, mtu=68..65520 or "
                   "mac=52:54:00:xx:xx:xx",
    [NET_TAP] = "ifname=NAME (at most 15 characters), mtu=68..65520 or mac=52:54:00:xx:xx:xx",
    [NET_IKC] = "group=NAME (1 to 32 of A-Z a-z 0-9 _ . -), mtu=68..65520 or mac=52:54:00:xx:xx:xx",
};

int net_spec_parse(const char *arg, unsigned index, struct net_spec *spec)
{
    *spec = (struct net_spec){ .kind = NET_USER };
    memcpy(spec->mac, qemu_mac, sizeof qemu_mac);
    spec->mac[5] = (uint8_t)(spec->mac[5] + index);
    size_t n = strcspn(arg, ",");
    if (n == 4 && !strncmp(arg, "user", n))
        spec->kind = NET_USER;
    else if (n == 6 && !strncmp(arg, "stream", n))
        spec->kind = NET_STREAM;
    else if (n == 3 && !strncmp(arg, "tap", n))
        spec->kind = NET_TAP;
    else if (n == 3 && !strncmp(arg, "ikc", n))
        spec->kind = NET_IKC;
    else
        return bad_input("--net '%s': the backend is 'user', 'stream', 'tap', 'ikc' or 'none' (e.g. --net "
                         "user,hostfwd=tcp::2222-:22 or --net stream,path=/tmp/net.sock,server=on)", arg);
    /* user-mode networking ends in this process, so its frames may be as large as libslirp
     * takes; a stream's or a TAP's peer expects Ethernet's, unless told otherwise */
    spec->mtu = spec->kind == NET_USER ? NET_MAX_MTU : 1500;
    struct opt_flag f;
    bool mac_given = false;
    for (const char *p = arg + n; opt_next_flag(&p, &f); ) {
        int bad;
        if (f.value == NULL)
            bad = 1;                                        /* every flag has a value */
        else if (!strcmp(f.key, "mac"))
            bad = parse_mac(f.value, spec->mac), mac_given = true;
        else if (!strcmp(f.key, "mtu"))
            bad = parse_mtu(f.value, &spec->mtu);
        else if (spec->kind == NET_USER)
            bad = user_flag(&spec->user, f.key, f.value);
        else if (spec->kind == NET_STREAM)
            bad = stream_flag(&spec->stream, f.key, f.value);
        else if (spec->kind == NET_IKC)
            bad = ikc_flag(&spec->ikc, f.key, f.value);
        else
            bad = tap_flag(&spec->tap, f.key, f.value);
        if (bad)
            return bad_input("--net '%s': '%.*s' is not %s", arg, f.len, f.text, usage[spec->kind]);
    }
    spec->user.mtu = spec->mtu;
    if (spec->kind == NET_TAP && !spec->tap.ifname[0])
        return bad_input("--net '%s': a TAP device needs ifname=NAME (e.g. --net tap,ifname=tap0)", arg);
    if (spec->kind == NET_IKC && !mac_given) {
        /* Every member of a group is another ring3 on this host, so qemu's one default MAC
         * would be everyone's: the process id (22 bits at most) and the NIC's number tell
         * them apart, in a block of locally administered addresses beside qemu's. */
        uint32_t id = ((uint32_t)getpid() << 2 | index) & 0xFFFFFF;
        const uint8_t mac[6] = { 0x52, 0x54, 0x01, (uint8_t)(id >> 16), (uint8_t)(id >> 8),
                                 (uint8_t)id };
        memcpy(spec->mac, mac, sizeof mac);
    }
    struct net_stream_options *o = &spec->stream;
    if (spec->kind == NET_STREAM && !o->path[0] == !o->port)
        return bad_input("--net '%s': a stream needs either path=SOCKET or port=PORT (with host=HOST, "
                         "else 127.0.0.1)", arg);
    if (spec->kind == NET_STREAM && o->path[0] && o->host[0])
        return bad_input("--net '%s': host= goes with port=, not with path=", arg);
    if (spec->kind == NET_STREAM && !o->path[0] && !o->host[0])
        snprintf(o->host, sizeof o->host, "127.0.0.1");
    return 0;
}
