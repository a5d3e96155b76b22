"""Solutions of labs/12_portability_lab.ipynb (same function names as the skeletons; solving only adds lines)."""


def diff_opencl():
    return r"""
__kernel void diff(const int n, __global const float *x, __global float *d)
{
    int i = get_global_id(0);
    if (i < n - 1)
        d[i] = x[i + 1] - x[i];
}
"""


def global_size_for(n, local_size):
    return ((n + local_size - 1) // local_size) * local_size


def transpose_opencl():
    return r"""
__kernel void transpose(const int rows, const int cols,
                        __global const float *in, __global float *out)
{
    __local float tile[TILE][TILE + 1];
    int lx = get_local_id(0), ly = get_local_id(1);
    int x = get_group_id(0) * TILE + lx;
    int y = get_group_id(1) * TILE + ly;
    if (x < cols && y < rows)
        tile[ly][lx] = in[y * cols + x];
    barrier(CLK_LOCAL_MEM_FENCE);
    x = get_group_id(1) * TILE + lx;
    y = get_group_id(0) * TILE + ly;
    if (x < rows && y < cols)
        out[y * rows + x] = tile[lx][ly];
}
"""


def matvec_acc():
    return r"""
void matvec(int m, int n, const float *restrict A, const float *restrict x, float *restrict y)
{
#pragma acc parallel loop copyin(A[0:m*n], x[0:n]) copyout(y[0:m])
    for (int i = 0; i < m; ++i) {
        float sum = 0.0f;
#pragma acc loop reduction(+:sum)
        for (int j = 0; j < n; ++j)
            sum += A[i * n + j] * x[j];
        y[i] = sum;
    }
}
"""


def opencl_names():
    return {
        "grid": "NDRange",
        "thread block": "work-group",
        "thread": "work-item",
        "shared memory": "local memory",
        "__syncthreads()": "barrier(CLK_LOCAL_MEM_FENCE)",
        "blockIdx.x": "get_group_id(0)",
        "threadIdx.x": "get_local_id(0)",
        "blockDim.x": "get_local_size(0)",
        "blockIdx.x * blockDim.x + threadIdx.x": "get_global_id(0)",
        "gridDim.x": "get_num_groups(0)",
    }


def choose_local_size():
    """Work-items per work-group for your diff kernel."""
    # 256: eight work-groups fill an SM of 2048 work-items, whole warps, and the size the chapter timed.
    return 256


def transpose_opencl_bug():
    return r"""
__kernel void transpose(const int rows, const int cols,
                        __global const float *in, __global float *out)
{
    __local float tile[TILE][TILE + 1];
    int lx = get_local_id(0), ly = get_local_id(1);
    int x = get_group_id(0) * TILE + lx;
    int y = get_group_id(1) * TILE + ly;
    if (x < cols && y < rows)
        tile[ly][lx] = in[y * cols + x];
    barrier(CLK_LOCAL_MEM_FENCE);
    x = get_group_id(1) * TILE + lx;
    y = get_group_id(0) * TILE + ly;
    if (x < rows && y < cols)
        out[y * rows + x] = tile[lx][ly];
}
"""


def predict_kernel_ms(n, loads, stores, itemsize, copy_gbs):
    """The least time of a memory-bound kernel, in ms: the bytes it moves over the copy ceiling."""
    # FILL ME IN (roughly 2 lines): bytes moved, then ms at copy_gbs
    nbytes = (loads + stores) * itemsize * n
    return nbytes / (copy_gbs * 1e9) * 1e3
