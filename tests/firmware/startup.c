/* tests/firmware/startup.c -- the smallest Cortex-M start-up for the firmware check: the vector
   table, .data copied from flash, .bss zeroed, the stack painted (to measure its peak), the FPU
   enabled, then main(); semihosting for output and exit (qemu-system-arm -semihosting).  No C
   library start-up, no heap: malloc is defined here to fail, so any allocation shows. */
#include <stddef.h>
#include <stdint.h>

extern uint32_t __data_load, __data_start, __data_end, __bss_start, __bss_end, __stack_bottom, __stack_top;
extern void (*__init_array_start[])(void);
extern void (*__init_array_end[])(void);
int main(void);

#define STACK_PAINT 0xC0FFEE11u
volatile uint32_t fw_malloc_calls;

static long semihost(long op, const void* arg) {
  register long r0 __asm__("r0") = op;
  register const void* r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}
void fw_write(const char* s) { semihost(0x04, s); } /* SYS_WRITE0 */
void fw_exit(int code) {
  /* SYS_EXIT_EXTENDED: ADP_Stopped_ApplicationExit and the status */
  static long block[2];
  block[0] = 0x20026;
  block[1] = code;
  semihost(0x20, block);
  for (;;) {}
}
/* bytes of the stack never written since reset (the paint still there) */
size_t fw_stack_unused(void) {
  const uint32_t* p = &__stack_bottom;
  while (p < &__stack_top && *p == STACK_PAINT) ++p;
  return (size_t)((const char*)p - (const char*)&__stack_bottom);
}
size_t fw_stack_size(void) { return (size_t)((const char*)&__stack_top - (const char*)&__stack_bottom); }

void* malloc(size_t n) { (void)n; ++fw_malloc_calls; return 0; }
void free(void* p) { (void)p; }
void* calloc(size_t a, size_t b) { (void)a; (void)b; ++fw_malloc_calls; return 0; }
void* realloc(void* p, size_t n) { (void)p; (void)n; ++fw_malloc_calls; return 0; }
/* no C library is linked: what the compiler may call */
void* memcpy(void* d, const void* s, size_t n) { char* a = d; const char* b = s; while (n--) *a++ = *b++; return d; }
void* memmove(void* d, const void* s, size_t n) {
  char* a = d; const char* b = s;
  if (a < b) while (n--) *a++ = *b++;
  else while (n--) a[n] = b[n];
  return d;
}
void* memset(void* d, int c, size_t n) { char* a = d; while (n--) *a++ = (char)c; return d; }
void abort(void) { fw_write("abort\n"); fw_exit(134); }

__attribute__((naked, noreturn)) void reset_handler(void) {
  __asm__ volatile(
      "ldr r0, =__stack_bottom\n"   /* paint the stack below our own frame (none yet: naked) */
      "ldr r1, =__stack_top\n"
      "ldr r2, =0xC0FFEE11\n"
      "1: cmp r0, r1\n"
      "bhs 2f\n"
      "str r2, [r0], #4\n"
      "b 1b\n"
      "2: ldr sp, =__stack_top\n"
      "b fw_start\n");
}

void fw_start(void) {
  volatile uint32_t* cpacr = (volatile uint32_t*)0xE000ED88u; /* FPU: CP10, CP11 full access */
  *cpacr |= (0xFu << 20);
  __asm__ volatile("dsb\n isb" ::: "memory");
  for (uint32_t *s = &__data_load, *d = &__data_start; d < &__data_end;) *d++ = *s++;
  for (uint32_t* d = &__bss_start; d < &__bss_end;) *d++ = 0;
  for (void (**f)(void) = __init_array_start; f < __init_array_end; ++f) (*f)();
  fw_exit(main());
}

static void default_handler(void) { fw_write("fault\n"); fw_exit(135); }
__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(&__stack_top), reset_handler, default_handler, default_handler, default_handler,
    default_handler, default_handler, 0, 0, 0, 0, default_handler, default_handler, 0, default_handler,
    default_handler};
