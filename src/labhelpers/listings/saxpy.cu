/* SAXPY in CUDA C: y = a*x + y, one thread per element.
 * The host launches ceil(n / threads) blocks, so the last block
 * may hold threads past the end: the guard. */
extern "C" __global__
void saxpy(const int n, const float a,
           const float *x,
           float *y)
{
    int i = blockIdx.x * blockDim.x
            + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
