"""Screen reading: pictures of GPU monitors (nvidia-smi, dmon, nvitop, nvtop, gpustat, tealeaves'
own pages) checked, timed and read back into each GPU's printed values.

Its own room inside ``data/``: it imports only ``data/`` and standard or third-party libraries
(numpy, Pillow, pytesseract), never ``app/``, so it imports without the dashboard's packages.
Importing the package loads none of its modules; import the one you need:

- ``screenshots``: an uploaded picture checked safely and its capture time found;
- ``read``: a screenshot read with Tesseract (``read_picture``, ``PictureReading``);
- ``grid``: a terminal screenshot read again as its character grid;
- ``values``: ``GpuReading`` and the number reading every tool's parser shares;
- ``tools``: each monitor's text parsed by its layout (``parse_text``); ``reconcile``: the
  readings made sound;
- ``nvtop`` and the ``nvtop_*`` modules: nvtop's header and charts;
- ``nvtop_samples``: nvtop's chart lines turned back into the samples it plotted.
"""
