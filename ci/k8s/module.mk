# ci/k8s/ — the Kubernetes Job that runs kaas-conform with agents on several
# nodes.  Its test checks the manifests (check_manifests.py) and runs the
# pods' script in network namespaces.
E2E_TESTS += ci/k8s/test_k8s.sh
