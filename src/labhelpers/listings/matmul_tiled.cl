/* Tiled matrix multiply in OpenCL C: C = A B, row-major floats,
 * A is m x k, B is k x n, C is m x n, any sizes.
 * A TILE x TILE work-group stages tiles of A and B in local memory.
 * Launch: local size (TILE, TILE), global size rounded up to whole
 * tiles; dimension 0 runs along the columns of C. */
#ifndef TILE
#define TILE 16
#endif

__kernel void matmul_tiled(const int m, const int k, const int n,
                           __global const float *A,
                           __global const float *B,
                           __global float *C)
{
    __local float As[TILE][TILE];  /* tile of A */
    __local float Bs[TILE][TILE];  /* tile of B */
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int col = get_global_id(0), row = get_global_id(1);
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += TILE) {
        /* every work-item loads (zeros outside the matrices):
           guard the loads, never the barrier */
        As[ty][tx] = (row < m && k0 + tx < k)
                     ? A[row * k + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < k && col < n)
                     ? B[(k0 + ty) * n + col] : 0.0f;
        /* RAW: the tiles are complete before anyone reads */
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TILE; ++kk)
            acc += As[ty][kk] * Bs[kk][tx];
        /* WAR: all reads done before the next tile lands */
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < m && col < n)
        C[row * n + col] = acc;
}
