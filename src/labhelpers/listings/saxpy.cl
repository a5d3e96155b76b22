/* SAXPY in OpenCL C: y = a*x + y, one work-item per element.
 * The host rounds the global size up to a whole number of work-groups,
 * so the last work-group may hold work-items past the end: the guard. */
__kernel void saxpy(const int n, const float a,
                    __global const float *x,
                    __global float *y)
{
    int i = get_global_id(0);
    /* = get_group_id(0) * get_local_size(0)
         + get_local_id(0) */
    if (i < n)
        y[i] = a * x[i] + y[i];
}
