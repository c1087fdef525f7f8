/* A stand-in libnvidia-ml.so.1 that replays recorded per-GPU values (issue 37).
 *
 * nvtop loads NVML with dlopen and asks it, a few times a second, for each device's name,
 * PCIe link, clocks, temperature, fan, power and cap, utilization, memory, PCIe throughput,
 * codec utilization and processes.  This library answers those calls from a replay table, so
 * that nvtop draws any number of GPUs carrying values recorded on real ones.  It implements
 * only the entry points nvtop 3.0.1 looks up (`strings nvtop | grep nvml`); the others are
 * absent, as on an old driver.
 *
 * The table (env TEALEAVES_NVML_REPLAY, a text file) has one sample per line, whitespace
 * separated, '#' lines skipped, rows of one GPU in time order:
 *   t_s gpu util_pct mem_util_pct power_mw power_limit_mw temp_c sm_clock_mhz mem_clock_mhz
 *   mem_used_bytes mem_total_bytes pcie_rx_kbs pcie_tx_kbs
 * t_s is seconds after the replay's start: env TEALEAVES_NVML_T0 (epoch seconds, so that
 * several programs replay one timeline), else the moment nvmlInit is called.  A query at time
 * t answers the GPU's last row with t_s <= t (its first row before that); a value written as
 * -1 answers NVML_ERROR_NOT_SUPPORTED, as a real driver does for a counter it lacks (fan on an
 * H200).  A line that is not 13 finite numbers (or longer than 1023 characters) is skipped;
 * GPU indices must run from 0 without gaps.  NVML's types and codes follow nvml.h (NVIDIA Management Library API reference).
 *
 * Build: cc -O2 -shared -fPIC -o libnvidia-ml.so.1 nvml_standin.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>

typedef int nvmlReturn_t;
enum { NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
       NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_INSUFFICIENT_SIZE = 7, NVML_ERROR_NOT_FOUND = 6,
       NVML_ERROR_UNKNOWN = 999 };

#define MAX_GPUS 64
#define NCOL 13

typedef struct { double *rows; size_t n, cap, at; int index; } gpu_t;
typedef gpu_t *nvmlDevice_t;

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

static gpu_t gpus[MAX_GPUS];
static int ngpus = -1;
static double t0;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static nvmlReturn_t load(void) {
  const char *path = getenv("TEALEAVES_NVML_REPLAY");
  const char *t0s = getenv("TEALEAVES_NVML_T0");
  if (!path) return NVML_ERROR_UNKNOWN;
  FILE *f = fopen(path, "r");
  if (!f) return NVML_ERROR_UNKNOWN;
  char line[1024];
  ngpus = 0;
  int whole = 1; /* the last piece read ended its line */
  while (fgets(line, sizeof line, f)) {
    int starts = whole;
    size_t len = strlen(line);
    whole = len > 0 && line[len - 1] == '\n';
    /* only whole lines are rows: the rest of a line longer than the buffer (a long comment)
     * is never read as one, and the line itself is skipped */
    if (!starts || !whole || line[0] == '#' || line[0] == '\n') continue;
    double v[NCOL];
    int k = 0;
    char *p = line, *end;
    for (; k < NCOL; k++) {
      v[k] = strtod(p, &end);
      if (end == p) break;
      p = end;
    }
    int finite = 1; /* a NaN or infinite field is no reading (and never an index) */
    for (int j = 0; j < k; j++) finite &= isfinite(v[j]) && v[j] > -1e15 && v[j] < 1e15;
    if (k != NCOL || !finite || !(v[1] >= 0 && v[1] < MAX_GPUS) || v[1] != (int)v[1]) continue;
    gpu_t *g = &gpus[(int)v[1]];
    if (g->n == g->cap) {
      g->cap = g->cap ? 2 * g->cap : 256;
      g->rows = realloc(g->rows, g->cap * NCOL * sizeof(double));
      if (!g->rows) { fclose(f); return NVML_ERROR_UNKNOWN; }
    }
    memcpy(g->rows + g->n * NCOL, v, sizeof v);
    g->n++;
    if ((int)v[1] + 1 > ngpus) ngpus = (int)v[1] + 1;
  }
  fclose(f);
  for (int i = 0; i < ngpus; i++) {
    gpus[i].index = i;
    if (!gpus[i].n) { /* GPUs are numbered from 0 without gaps, as NVML's indices are */
      fprintf(stderr, "nvml_standin: %s: no rows for GPU %d of %d\n", path, i, ngpus);
      ngpus = 0;
      return NVML_ERROR_UNKNOWN;
    }
  }
  t0 = t0s ? strtod(t0s, NULL) : now_s();
  return ngpus > 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

/* The GPU's row in force now: the last with t_s <= now - t0 (rows in time order). */
static const double *row(gpu_t *g) {
  if (!g || !g->n) return NULL;
  double t = now_s() - t0;
  while (g->at + 1 < g->n && g->rows[(g->at + 1) * NCOL] <= t) g->at++;
  while (g->at > 0 && g->rows[g->at * NCOL] > t) g->at--;
  return g->rows + g->at * NCOL;
}

#define VALUE(dev, col, out, type)                                  \
  do {                                                              \
    const double *r = row(dev);                                     \
    if (!r) return NVML_ERROR_UNINITIALIZED;                        \
    if (r[col] < 0) return NVML_ERROR_NOT_SUPPORTED;                \
    *(out) = (type)r[col];                                          \
  } while (0)

nvmlReturn_t nvmlInit_v2(void) { return ngpus > 0 ? NVML_SUCCESS : load(); }
nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
  if (ngpus <= 0) return NVML_ERROR_UNINITIALIZED;
  *count = (unsigned int)ngpus;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *dev) {
  if ((int)i >= ngpus) return NVML_ERROR_INVALID_ARGUMENT;
  *dev = &gpus[i];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *dev) {
  return nvmlDeviceGetHandleByIndex_v2(i, dev);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len) {
  (void)dev;
  if (len < 12) return NVML_ERROR_INSUFFICIENT_SIZE;
  strcpy(name, "NVIDIA H200");
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
  memset(pci, 0, sizeof *pci);
  pci->bus = 0x18 + 0x10 * (unsigned)dev->index;
  snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
  pci->pciDeviceId = 0x233510de;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *p) { return nvmlDeviceGetPciInfo_v3(d, p); }
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfo_t *p) { return nvmlDeviceGetPciInfo_v3(d, p); }

/* An H200 SXM's link: PCIe 5 x16 (as nvidia-smi -q shows on the recording host). */
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { (void)d; *v = 5; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { (void)d; *v = 16; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { (void)d; *v = 5; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { (void)d; *v = 16; return NVML_SUCCESS; }

/* Counter 0 is NVML_PCIE_UTIL_TX_BYTES, 1 NVML_PCIE_UTIL_RX_BYTES; values in KB/s. */
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t dev, int counter, unsigned int *v) {
  VALUE(dev, counter == 1 ? 11 : 12, v, unsigned int);
  return NVML_SUCCESS;
}

/* Clock types: 0 graphics, 1 SM, 2 memory, 3 video. H200 maxima: 1980 MHz SM, 3201 MHz memory. */
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, int type, unsigned int *v) {
  VALUE(dev, type == 2 ? 8 : 7, v, unsigned int);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t dev, int type, unsigned int *v) {
  (void)dev;
  *v = type == 2 ? 3201 : 1980;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *v) {
  (void)sensor;
  VALUE(dev, 6, v, unsigned int);
  return NVML_SUCCESS;
}
/* Thresholds: 0 shutdown, 1 slowdown, 2 memory max, 3 GPU max (H200: 92/89/95/87 C). */
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t dev, int type, unsigned int *v) {
  static const unsigned int t[] = {92, 89, 95, 87};
  (void)dev;
  if (type < 0 || type > 3) return NVML_ERROR_NOT_SUPPORTED;
  *v = t[type];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t dev, unsigned int *v) {
  (void)dev; (void)v;
  return NVML_ERROR_NOT_SUPPORTED; /* an H200 SXM has no fan of its own */
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *v) {
  VALUE(dev, 4, v, unsigned int);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned int *v) {
  VALUE(dev, 5, v, unsigned int);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u) {
  const double *r = row(dev);
  if (!r) return NVML_ERROR_UNINITIALIZED;
  if (r[2] < 0 || r[3] < 0) return NVML_ERROR_NOT_SUPPORTED;
  u->gpu = (unsigned int)r[2];
  u->memory = (unsigned int)r[3];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m) {
  const double *r = row(dev);
  if (!r) return NVML_ERROR_UNINITIALIZED;
  if (r[9] < 0 || r[10] <= 0) return NVML_ERROR_NOT_SUPPORTED;
  m->total = (unsigned long long)r[10];
  m->used = (unsigned long long)r[9];
  m->free = m->total > m->used ? m->total - m->used : 0;
  return NVML_SUCCESS;
}

/* No video engines in use: 0 %, sampled over 167 ms as a real driver reports. */
nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *p) {
  (void)d; *u = 0; *p = 167000; return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *p) {
  (void)d; *u = 0; *p = 167000; return NVML_SUCCESS;
}

/* No processes are shown: the replay carries none (count 0, as a driver answers for a GPU
 * whose processes live in another container). */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count, void *infos) {
  (void)d; (void)infos; *count = 0; return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *count, void *infos) {
  (void)d; (void)infos; *count = 0; return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, void *s, unsigned int *count,
                                             unsigned long long last) {
  (void)d; (void)s; (void)last; *count = 0; return NVML_ERROR_NOT_FOUND;
}
