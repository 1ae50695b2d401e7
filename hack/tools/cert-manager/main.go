// Command cert-manager-controller runs cert-manager's own controllers (github.com/cert-manager/cert-manager/pkg/controller/...,
// pinned in go.mod) against a kubeconfig, for the integration tests: an Issuer becomes Ready, a Certificate gets a
// CertificateRequest, the request is approved and signed, and the key pair lands in the Certificate's Secret — all by
// upstream code.
//
// Why this small main and not upstream's cmd/controller: since v1.12 that command is the separate module
// github.com/cert-manager/cert-manager/controller-binary, whose path matches no directory in the repository and which
// replaces the main module with "../../"; the Go module proxy cannot serve it (404), so it cannot be pinned and built
// like the control plane. This file only wires the upstream controllers the way cmd/controller/app.Run does (one
// ContextFactory, the registered constructors for the enabled controllers, then the shared informer factories);
// it has no leader election, metrics, healthz or webhook (none is needed to issue certificates), and only the
// self-signed and CA issuers are linked in (ACME, Vault and Venafi would triple the build for nothing the tests use).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Controllers register themselves with controller.Register in init; the issuers with issuer.RegisterIssuer.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	fs := flag.NewFlagSet("cert-manager-controller", flag.ContinueOnError)
	klog.InitFlags(fs) // -v=N as upstream
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (required)")
	namespace := fs.String("namespace", "", "only watch this namespace (empty: all)")
	clusterResourceNamespace := fs.String("cluster-resource-namespace", "kube-system", "namespace of ClusterIssuer secrets")
	workers := fs.Int("concurrent-workers", 5, "workers per controller")
	controllers := fs.String("controllers", "*", "comma-separated controllers to run; * = all linked in")
	fs.SetOutput(io.Discard) // a bad invocation is one line, not the usage text (-h still prints it)
	err := fs.Parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stderr)
		fs.PrintDefaults()
		os.Exit(0)
	}
	if err == nil && (*kubeconfig == "" || fs.NArg() > 0) {
		err = errors.New("--kubeconfig is required and no positional arguments are taken")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager-controller: %v\n", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf.InitLogs()
	defer logf.FlushLogs()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, *kubeconfig, *namespace, *clusterResourceNamespace, *workers, *controllers); err != nil {
		logf.Log.Error(err, "cert-manager-controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(rootCtx context.Context, kubeconfig, namespace, clusterResourceNamespace string, workers int, only string) error {
	log := logf.FromContext(rootCtx)
	g, rootCtx := errgroup.WithContext(rootCtx)

	// The upstream defaults of internal/apis/config/controller/v1alpha1 for what these controllers read.
	factory, err := controller.NewContextFactory(rootCtx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		Namespace:          namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        clusterResourceNamespace,
			ClusterIssuerAmbientCredentials: true,
		},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	ctx, err := factory.Build()
	if err != nil {
		return err
	}

	known := controller.Known()
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	slices.Sort(names)
	enabled := names
	if only != "*" {
		enabled = strings.Split(only, ",")
		for _, name := range enabled {
			if _, ok := known[name]; !ok {
				return fmt.Errorf("unknown controller %q (linked in: %s)", name, strings.Join(names, ", "))
			}
		}
	}
	log.Info("starting cert-manager controllers", "controllers", enabled, "namespace", namespace)
	for _, name := range enabled {
		if namespace != "" && name == clusterissuers.ControllerName {
			continue // as upstream: a namespaced controller does not reconcile ClusterIssuers
		}
		iface, err := known[name](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		g.Go(func() error { return iface.Run(workers, rootCtx) })
	}
	ctx.SharedInformerFactory.Start(rootCtx.Done())
	ctx.KubeSharedInformerFactory.Start(rootCtx.Done())
	ctx.HTTP01ResourceMetadataInformersFactory.Start(rootCtx.Done())

	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("control loops exited")
	ctx.HTTP01ResourceMetadataInformersFactory.Shutdown()
	ctx.KubeSharedInformerFactory.Shutdown()
	ctx.SharedInformerFactory.Shutdown()
	return nil
}
