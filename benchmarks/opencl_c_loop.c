/* The cost of OpenCL launch schedules with no Python at all: a loop of
 * clEnqueueNDRangeKernel calls in C (benchmarks/opencl_c_loop.py builds and drives it).
 * It shows what a driver charges for a schedule itself, apart from any binding's cost. */
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef int32_t cl_int;
typedef void *handle;
extern cl_int clEnqueueNDRangeKernel(handle, handle, uint32_t, const size_t *, const size_t *,
                                     const size_t *, uint32_t, const handle *, handle *);
extern cl_int clFlush(handle);
extern cl_int clFinish(handle);
extern cl_int clReleaseEvent(handle);
extern handle clCreateUserEvent(handle, cl_int *);
extern cl_int clSetUserEventStatus(handle, cl_int);

enum { WINDOW = 100, MAX_QUEUES = 8 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void open_gate(handle gate) {
    clSetUserEventStatus(gate, 0); /* CL_COMPLETE */
    clReleaseEvent(gate);
}

/* ``launches`` launches of ``kernel`` (one work-item): launch i goes to queue
 * (i / block) % nq; with ``event`` each makes an event and releases it (as pyopencl's call
 * does); every WINDOW launches each queue is flushed. ``gate`` 1: each window's first
 * launch per queue waits for a user event set once the window is enqueued (zyx's gate);
 * 2: one user event holds the whole burst back until it is enqueued. Writes µs per launch
 * of the burst's host time and of the burst until every queue finished; 0, or the first
 * failed call's status. */
int burst(handle context, handle *queues, int nq, handle kernel, int launches, int block,
          int event, int gate, double *host, double *done) {
    size_t one = 1;
    handle held = NULL;
    int used[MAX_QUEUES] = {0};
    cl_int status = 0;
    double start = now();
    for (int i = 0; i < launches && !status; i++) {
        int q = (i / block) % nq;
        if ((gate == 1 && i % WINDOW == 0) || (gate == 2 && i == 0)) {
            held = clCreateUserEvent(context, &status);
            memset(used, 0, sizeof used);
        }
        int waits = gate && !used[q];
        used[q] = 1;
        handle made = NULL;
        status = clEnqueueNDRangeKernel(queues[q], kernel, 1, NULL, &one, &one, waits,
                                        waits ? &held : NULL, event ? &made : NULL);
        if (made)
            clReleaseEvent(made);
        if (i % WINDOW == WINDOW - 1) {
            if (gate == 1) {
                open_gate(held);
                held = NULL;
            }
            for (int k = 0; k < nq; k++)
                clFlush(queues[k]);
        }
    }
    double enqueued = now();
    if (held)
        open_gate(held);
    for (int k = 0; k < nq; k++)
        clFinish(queues[k]);
    *host = (enqueued - start) / launches * 1e6;
    *done = (now() - start) / launches * 1e6;
    return status;
}
