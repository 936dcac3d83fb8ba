/* Time, host input and waiting: the devices advanced to now, and the host timer armed for the next deadline. */
#ifndef RING3_EVENTS_H
#define RING3_EVENTS_H

#include <stdint.h>

#include "hw/clock.h"
#include "monitor/cpu/vcpu.h"

uint64_t events_now(void);                 /* the host's monotonic clock, ns */
/* The devices' clock (the platform's): the host's, less the time the guest was held. */
extern const struct hw_clock events_guest_clock;
/* The next device deadline after host time (now, from events_now), in host time;
 * PLATFORM_NO_DEADLINE for none. */
uint64_t events_next_deadline(struct vcpu *v, uint64_t now);
/* The guest stands still from events_clock_stop to events_clock_start (gdb, `stop`). */
void events_clock_stop(void);
void events_clock_start(void);
/* Advance the devices to now; never blocks. Returns that now (events_now), for events_arm_at. */
uint64_t events_poll(struct vcpu *v);
void events_input(struct vcpu *v);         /* move waiting host input into the UART */
/* A timer tick in guest code: host input, gdb, the monitor prompt, and a `stop`'s hold. */
void events_tick(struct vcpu *v);
void events_wait(struct vcpu *v);          /* hlt: sleep until an interrupt can be taken */
void events_arm(struct vcpu *v);           /* arm the host timer for the next device deadline */
/* The same from host time (now), read at most microseconds before: each clock read costs
 * 25-45 ns here, and the gate's path would read it four times. */
void events_arm_at(struct vcpu *v, uint64_t now);
void events_arm_soon(struct vcpu *v);      /* arm it for a moment from now */
void events_alarm(void);
/* The monitor's `stop` (prompt_stopped): the guest waits here, the terminal and the --monitor
 * socket still served, until a `cont`. No device deadline fires meanwhile. */
void events_hold(struct vcpu *v);                   /* the host timer fired (signal context) */
int events_init(struct vcpu *v);

#endif
