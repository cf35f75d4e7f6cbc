from gemm_kernels.plan.calibrate import main

main()
