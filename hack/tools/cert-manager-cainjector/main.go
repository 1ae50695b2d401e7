// Command cert-manager-cainjector runs cert-manager's CA injector (github.com/cert-manager/cert-manager/pkg/controller/cainjector,
// pinned in go.mod) against a kubeconfig, for the tests: it copies the CA of the Certificate named by an object's
// `cert-manager.io/inject-ca-from` annotation into its caBundle (ValidatingWebhookConfiguration, MutatingWebhookConfiguration,
// CustomResourceDefinition conversion, APIService) — all by upstream code.
//
// Why this small main and not upstream's cmd/cainjector: as for cert-manager-controller (hack/tools/cert-manager/main.go),
// since v1.12 that command is the separate module github.com/cert-manager/cert-manager/cainjector-binary, which the Go
// module proxy cannot serve. This file wires the upstream injectors as cmd/cainjector/app does (a controller-runtime
// manager whose client reads Secrets directly, not from a cache, then cainjector.RegisterAllInjectors for every
// injectable kind, with the Certificate data source); it has no leader election, metrics or healthz (none is needed to
// inject a CA). Its own module so that adding it did not change hack/tools/cert-manager's cache key.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
)

func main() {
	fs := flag.NewFlagSet("cert-manager-cainjector", flag.ContinueOnError)
	klog.InitFlags(fs) // -v=N as upstream
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (required)")
	namespace := fs.String("namespace", "", "only inject CAs from Secrets and Certificates of this namespace (empty: all)")
	fs.SetOutput(io.Discard)
	err := fs.Parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stderr)
		fs.PrintDefaults()
		return
	}
	if err == nil && *kubeconfig == "" {
		err = errors.New("--kubeconfig is required")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager-cainjector: %v (-h for the flags)\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *namespace); err != nil {
		klog.ErrorS(err, "cainjector failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, kubeconfig, namespace string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "cert-manager-cainjector"
	ctrl.SetLogger(klog.NewKlogr())
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, admissionv1.AddToScheme, apiextv1.AddToScheme, apiregv1.AddToScheme, cmapi.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	cacheOpts := cache.Options{ReaderFailOnMissingInformer: true}
	if namespace != "" {
		// As upstream's --namespace: Secrets and Certificates of that namespace only; the injectables are cluster-scoped.
		cacheOpts.ByObject = map[client.Object]cache.ByObject{
			&corev1.Secret{}:      {Namespaces: map[string]cache.Config{namespace: {}}},
			&cmapi.Certificate{}: {Namespaces: map[string]cache.Config{namespace: {}}},
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    namespace,
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	}); err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	return mgr.Start(ctx)
}
