// chartcheck checks what the rayshare Helm chart renders, beyond `helm lint`:
//
//	chartcheck manifests -release R -namespace NS -mode MODE [-ca-bundle B64] [-ray-auth-secrets] FILE
//	    Strictly decodes every rendered object into its Kubernetes type (unknown or
//	    misspelled fields fail), checks that the objects fit together (ServiceAccount,
//	    RBAC, Service, Deployment, webhook, certificates) and evaluates the webhook's CEL
//	    matchConditions against sample RayJobs and pods. -ray-auth-secrets: rendered with
//	    rbac.rayAuthSecrets (the ClusterRole also gets Secrets).
//	chartcheck config-fields CONFIG_RS VALUES SCHEMA
//	    Checks that `config` in values.yaml and in values.schema.json has exactly the fields
//	    of rayshare's Config struct in src/config/mod.rs (rayshare rejects unknown fields, so a
//	    renamed field would crash-loop the pods).
//	chartcheck readme [-write] VALUES README
//	    Checks (or, with -write, rewrites) the values table in README between the markers
//	    `<!-- values-table:start -->` and `<!-- values-table:end -->`, generated from the
//	    `# --` comments in values.yaml.
//	chartcheck installs [-templates DIR] README RENDER...
//	    Checks the README's "What it installs" table against the renders: every rendered
//	    kind has a row and every kind in the Object column is rendered (and every top-level
//	    `kind:` of the templates in DIR is rendered); the Notes of the rows naming ClusterRole
//	    and Role state each rendered rule as `resource[.group][/name] verb/verb/...` with
//	    exactly its verbs, and no other rule (installs.go).
//	chartcheck versions CARGO_TOML CHART_YAML VALUES CHANGELOG MANIFEST WORKFLOW CONTROLPLANE_GO_MOD
//	    One version for the crate (and so the CLI's --version), the chart's version and
//	    appVersion (and so the image tag), the newest CHANGELOG entry and the plain
//	    manifests' image; the release workflow pushes the image the chart pulls; the chart's
//	    kubeVersion starts at the Kubernetes the tests run (versions.go).
package main

import (
	"fmt"
	"os"
)

const webhookName = "rayshare.rayshare.io"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chartcheck manifests|readme|config-fields|installs|versions ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "manifests":
		err = manifestsCmd(os.Args[2:])
	case "readme":
		err = readmeCmd(os.Args[2:])
	case "config-fields":
		err = configFieldsCmd(os.Args[2:])
	case "installs":
		err = installsCmd(os.Args[2:])
	case "versions":
		err = versionsCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartcheck:", err)
		os.Exit(1)
	}
}
