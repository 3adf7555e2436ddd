/* backend_nocuda.c — the cuda backend of a build without the CUDA toolkit
 * (-DRANKSNAP_WITH_CUDA=OFF): it reports itself unavailable, so auto picks sim. */
#include "backend.h"
#include "backend_cuda.h"
#include "errors.h"

ranksnap_status rs_backend_cuda_check(void)
{
    return rs_error(RANKSNAP_ERR_UNSUPPORTED,
                    "RANKSNAP_BACKEND=cuda: this ranksnap was built without CUDA "
                    "(-DRANKSNAP_WITH_CUDA=OFF); use RANKSNAP_BACKEND=sim or rebuild");
}

ranksnap_status rs_backend_cuda_create(int device, rs_backend **out)
{
    (void)device;
    *out = NULL;
    return rs_backend_cuda_check();
}

int rs_backend_cuda_available(void)
{
    return 0;
}

int rs_backend_cuda_device_count(void)
{
    return 0;
}

int rs_backend_cuda_context_device(int *device)
{
    (void)device;
    return 0;
}

ranksnap_status rs_backend_cuda_current_device(int *device)
{
    *device = 0;
    return rs_backend_cuda_check();
}

int rs_backend_cuda_in_call(void)
{
    return 0;
}

void rs_backend_cuda_own_call(int entering)
{
    (void)entering;
}
