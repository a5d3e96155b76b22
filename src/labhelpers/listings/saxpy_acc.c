/* SAXPY in OpenACC C: the lecture's four versions, and the one-loop SAXPY of the side-by-side listings.
 *
 * Each of the four versions runs two SAXPYs in a row, as in the lecture:
 *     y = a*x + y;   then   y = b*x + y;
 * so that a data region has something to save: the second loop finds x and y already on the device.
 *
 * Every directive names its arrays with a bound (x[0:n]). NVIDIA's compiler (nvc -acc) infers the
 * bounds of a pointer from the loop and says so (-Minfo=accel: "Generating implicit copy(y[:n])");
 * GCC does not, and a pointer without a bound would be copied as a bare address.
 *
 * Compile: gcc -O3 -fopenacc -fopt-info-optimized-omp -shared -fPIC \
 *              saxpy_acc.c -o libsaxpy_acc.so
 * Without an offload compiler (gcc-NN-offload-nvptx) the directives run on the host, in one thread.
 */

/* 1. Plain C: no directive, one loop after the other on the host. */
void saxpy_naive(int n, float a, float b,
                 const float *restrict x, float *restrict y)
{
    for (int i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
    for (int i = 0; i < n; ++i)
        y[i] = b * x[i] + y[i];
}

/* 2. kernels: the compiler decides which loops are parallel (it must prove it). */
void saxpy_kernels(int n, float a, float b,
                 const float *restrict x, float *restrict y)
{
#pragma acc kernels copyin(x[0:n]) copy(y[0:n])
    {
        for (int i = 0; i < n; ++i)
            y[i] = a * x[i] + y[i];
        for (int i = 0; i < n; ++i)
            y[i] = b * x[i] + y[i];
    }
}

/* 3. parallel loop: you assert that each loop is parallel;
 *    each loop copies x in, y in and y out. */
void saxpy_parallel(int n, float a, float b,
                 const float *restrict x, float *restrict y)
{
#pragma acc parallel loop copyin(x[0:n]) copy(y[0:n])
    for (int i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
#pragma acc parallel loop copyin(x[0:n]) copy(y[0:n])
    for (int i = 0; i < n; ++i)
        y[i] = b * x[i] + y[i];
}

/* 4. data region: x copied in once, y in and out once;
 *    both loops find them present. */
void saxpy_data(int n, float a, float b,
                 const float *restrict x, float *restrict y)
{
#pragma acc data copyin(x[0:n]) copy(y[0:n])
    {
#pragma acc parallel loop present(x[0:n], y[0:n])
        for (int i = 0; i < n; ++i)
            y[i] = a * x[i] + y[i];
#pragma acc parallel loop present(x[0:n], y[0:n])
        for (int i = 0; i < n; ++i)
            y[i] = b * x[i] + y[i];
    }
}

/* The one-loop SAXPY, y = a*x + y, as the CUDA C, OpenCL C and
 * Numba listings compute it. */
void saxpy(int n, float a,
           const float *restrict x, float *restrict y)
{
#pragma acc parallel loop copyin(x[0:n]) copy(y[0:n])
    for (int i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
}
