/* Tiled matrix multiply in CUDA C: C = A B, row-major floats,
 * A is m x k, B is k x n, C is m x n, any sizes.
 * A TILE x TILE block stages tiles of A and B in shared memory.
 * Launch: blocks of (TILE, TILE) threads, ceil(n / TILE) x
 * ceil(m / TILE) blocks; x runs along the columns of C. */
#ifndef TILE
#define TILE 16
#endif

extern "C" __global__
void matmul_tiled(const int m, const int k, const int n,
                  const float *A,
                  const float *B,
                  float *C)
{
    __shared__ float As[TILE][TILE];  /* tile of A */
    __shared__ float Bs[TILE][TILE];  /* tile of B */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col = blockIdx.x * TILE + tx;
    const int row = blockIdx.y * TILE + ty;
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += TILE) {
        /* every thread loads (zeros outside the matrices):
           guard the loads, never the barrier */
        As[ty][tx] = (row < m && k0 + tx < k)
                     ? A[row * k + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < k && col < n)
                     ? B[(k0 + ty) * n + col] : 0.0f;
        /* RAW: the tiles are complete before anyone reads */
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk)
            acc += As[ty][kk] * Bs[kk][tx];
        /* WAR: all reads done before the next tile lands */
        __syncthreads();
    }
    if (row < m && col < n)
        C[row * n + col] = acc;
}
