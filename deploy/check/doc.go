// Package check holds the tests of memgate's deployment artefacts: the Helm
// chart in charts/memgate rendered for every values file under its ci/
// folder, and the container image built from the Dockerfile and run.
package check
