/* LED indicator: no MCU on this board (docs/BRIEF.md), so there is no firmware to run.
 * J1 pin 1 is +5V, pin 2 is GND (docs/PINOUT.md). */
#ifndef PINS_H
#define PINS_H
#define J1_PIN_5V 1
#define J1_PIN_GND 2
#endif
