"""`python -m zynbook.kernel install [...]` installs the kernelspec; anything else starts the
kernel (Jupyter runs `python -m zynbook.kernel -f CONNECTION_FILE`)."""
import sys

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "install":
        from .kernelspec import main

        sys.exit(main(sys.argv[2:]))

    from ipykernel.kernelapp import IPKernelApp

    from .kernel import ZynMLKernel

    IPKernelApp.launch_instance(kernel_class=ZynMLKernel)
