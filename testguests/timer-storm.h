/* timer-storm: the checksum loop and counters shared by ring 0 (timer-storm.c) and ring 3. */
#ifndef TG_TIMER_STORM_H
#define TG_TIMER_STORM_H

#include <stdint.h>

#define STORM_WORDS 256

extern uint32_t storm_data[STORM_WORDS];
extern uint32_t storm_reference;
extern volatile uint32_t storm_ticks, storm_target;

uint32_t storm_checksum(void);
/* Recomputes the checksum until storm_target ticks; returns the number of wrong results. */
uint32_t storm_busy(void);
/* storm_busy at CPL 3, then SYS_EXIT with its result. */
void storm_user_busy(void) __attribute__((noreturn));

#endif
