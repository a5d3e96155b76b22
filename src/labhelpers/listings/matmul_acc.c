/* Matrix multiply C = A B in OpenACC C, the directives added one at a time.
 *
 * Row-major float matrices: A is m x k, B is k x n, C is m x n. The innermost loop (over k) is a
 * dot product: a reduction into one scalar, so it runs sequentially inside each (i, j) iteration.
 *
 * Compile: gcc -O3 -fopenacc -fopt-info-optimized-omp -shared -fPIC \
 *              matmul_acc.c -o libmatmul_acc.so
 */

/* 0. Plain C. */
void matmul_serial(int m, int k, int n, const float *restrict A,
                 const float *restrict B, float *restrict C)
{
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            float sum = 0.0f;
            for (int p = 0; p < k; ++p)
                sum += A[i * k + p] * B[p * n + j];
            C[i * n + j] = sum;
        }
}

/* 1. parallel loop: the rows are shared out among gangs;
 *    each row's columns run in order. */
void matmul_parallel(int m, int k, int n, const float *restrict A,
                 const float *restrict B, float *restrict C)
{
#pragma acc parallel loop copyin(A[0:m*k], B[0:k*n]) copyout(C[0:m*n])
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            float sum = 0.0f;
            for (int p = 0; p < k; ++p)
                sum += A[i * k + p] * B[p * n + j];
            C[i * n + j] = sum;
        }
}

/* 2. collapse(2): the m * n (i, j) pairs form one parallel loop,
 *    like a 2D grid of threads. */
void matmul_collapse(int m, int k, int n, const float *restrict A,
                 const float *restrict B, float *restrict C)
{
#pragma acc parallel loop collapse(2) copyin(A[0:m*k], B[0:k*n]) copyout(C[0:m*n])
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            float sum = 0.0f;
#pragma acc loop seq
            for (int p = 0; p < k; ++p)
                sum += A[i * k + p] * B[p * n + j];
            C[i * n + j] = sum;
        }
}

/* 3. gang / vector: rows to gangs (blocks), columns to vector lanes
 *    (threads of a block), 128 lanes. */
void matmul_gang_vector(int m, int k, int n, const float *restrict A,
                 const float *restrict B, float *restrict C)
{
#pragma acc parallel vector_length(128) \
                     copyin(A[0:m*k], B[0:k*n]) copyout(C[0:m*n])
#pragma acc loop gang
    for (int i = 0; i < m; ++i) {
#pragma acc loop vector
        for (int j = 0; j < n; ++j) {
            float sum = 0.0f;
            for (int p = 0; p < k; ++p)
                sum += A[i * k + p] * B[p * n + j];
            C[i * n + j] = sum;
        }
    }
}

/* 4. kernels: the compiler looks for the parallel loops itself
 *    (and reports what it found). */
void matmul_kernels(int m, int k, int n, const float *restrict A,
                 const float *restrict B, float *restrict C)
{
#pragma acc kernels copyin(A[0:m*k], B[0:k*n]) copyout(C[0:m*n])
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            float sum = 0.0f;
            for (int p = 0; p < k; ++p)
                sum += A[i * k + p] * B[p * n + j];
            C[i * n + j] = sum;
        }
}
