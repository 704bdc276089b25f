module rayshare.test/kuberayyaml

go 1.22

// The versions KubeRay ray-operator v1.6.1 builds with (its go.mod).
require (
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	sigs.k8s.io/yaml v1.6.0
)
