/* The host's time-stamp counter. */
#ifndef RING3_LIB_TSC_H
#define RING3_LIB_TSC_H

#include <stdint.h>

/* The host's TSC frequency in kHz, measured over 10 ms on the first call. */
uint32_t tsc_khz(void);

#endif
