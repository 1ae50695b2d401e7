// Command cr-anchor is the Foo controller written with controller-runtime: the anchor the bench (bench/vs-cr.ts)
// measures the TypeScript manager against. Same behaviour as pkg/controllers/foo: a Deployment per Foo with a
// controller ownerReference (Owns), replicas fixed to spec.replicas, status.availableReplicas mirrored (written only
// when it differs), a Normal "Synced" Event when the reconcile changed something, a Warning "ErrResourceExists" and a
// retry when the named Deployment is not the Foo's. 8 workers, no client-side rate limit, /readyz = caches synced.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Foo is samplecontroller.k8s.io/v1alpha1 Foo, typed by hand (DeepCopy below; no controller-gen).
type Foo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		DeploymentName string `json:"deploymentName"`
		Replicas       *int32 `json:"replicas,omitempty"`
	} `json:"spec"`
	Status struct {
		AvailableReplicas *int32 `json:"availableReplicas,omitempty"`
	} `json:"status,omitempty"`
}

type FooList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Foo `json:"items"`
}

func cp32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func (f *Foo) DeepCopyObject() runtime.Object {
	out := *f
	f.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Replicas, out.Status.AvailableReplicas = cp32(f.Spec.Replicas), cp32(f.Status.AvailableReplicas)
	return &out
}

func (l *FooList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Foo, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Foo)
	}
	return &out
}

var gv = schema.GroupVersion{Group: "samplecontroller.k8s.io", Version: "v1alpha1"}

type reconciler struct {
	client.Client
	recorder record.EventRecorder
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	foo := &Foo{}
	if err := r.Get(ctx, req.NamespacedName, foo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if foo.DeletionTimestamp != nil || foo.Spec.DeploymentName == "" {
		return ctrl.Result{}, nil
	}
	changed := false
	dep := &appsv1.Deployment{}
	err := r.Get(ctx, client.ObjectKey{Namespace: foo.Namespace, Name: foo.Spec.DeploymentName}, dep)
	if apierrors.IsNotFound(err) {
		dep = newDeployment(foo)
		if err := ctrl.SetControllerReference(foo, dep, r.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, dep); err != nil {
			return ctrl.Result{}, err // AlreadyExists: the cache catches up and the retry sees it
		}
		changed = true
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !metav1.IsControlledBy(dep, foo) {
		msg := fmt.Sprintf("Resource %q already exists and is not managed by Foo", dep.Name)
		r.recorder.Event(foo, corev1.EventTypeWarning, "ErrResourceExists", msg)
		return ctrl.Result{}, fmt.Errorf("%s", msg)
	}
	if foo.Spec.Replicas != nil && (dep.Spec.Replicas == nil || *dep.Spec.Replicas != *foo.Spec.Replicas) {
		patch := client.MergeFromWithOptions(dep.DeepCopy(), client.MergeFromWithOptimisticLock{})
		dep.Spec.Replicas = cp32(foo.Spec.Replicas)
		if err := r.Patch(ctx, dep, patch); err != nil {
			return ctrl.Result{}, err
		}
		changed = true
	}
	available := dep.Status.AvailableReplicas
	if foo.Status.AvailableReplicas == nil || *foo.Status.AvailableReplicas != available {
		patch := client.MergeFromWithOptions(foo.DeepCopyObject().(*Foo), client.MergeFromWithOptimisticLock{})
		foo.Status.AvailableReplicas = &available
		if err := r.Status().Patch(ctx, foo, patch); err != nil {
			return ctrl.Result{}, err
		}
		changed = true
	}
	if changed {
		r.recorder.Event(foo, corev1.EventTypeNormal, "Synced", "Foo synced successfully")
	}
	return ctrl.Result{}, nil
}

// newDeployment is k8s.io/sample-controller's newDeployment (the owner reference is set by the caller).
func newDeployment(foo *Foo) *appsv1.Deployment {
	labels := map[string]string{"app": "nginx", "controller": foo.Name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: foo.Spec.DeploymentName, Namespace: foo.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: cp32(foo.Spec.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}}},
			},
		},
	}
}

func main() {
	metricsAddr := flag.String("metrics-bind-address", "0", "metrics address (0: off)")
	probeAddr := flag.String("health-probe-bind-address", ":8081", "health probe address")
	flag.Bool("metrics-secure", false, "accepted for the bench's command line; metrics are plain HTTP")
	leaderElect := flag.Bool("leader-elect", false, "leader election")
	workers := flag.Int("workers", 8, "MaxConcurrentReconciles")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	scheme.AddKnownTypes(gv, &Foo{}, &FooList{})
	metav1.AddToGroupVersion(scheme, gv)

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit (the TypeScript manager has none)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *probeAddr,
		LeaderElection:         *leaderElect,
		LeaderElectionID:       "cr-anchor-foo",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r := &reconciler{Client: mgr.GetClient(), recorder: mgr.GetEventRecorderFor("foo-controller")} //nolint:staticcheck // core/v1 Events, as the TypeScript manager writes
	if err := ctrl.NewControllerManagedBy(mgr).For(&Foo{}).Owns(&appsv1.Deployment{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).Complete(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = mgr.AddHealthzCheck("ping", func(*http.Request) error { return nil })
	// Ready = both informers synced, as the TypeScript manager's informer-sync check. They are asked for here, before
	// Start, so they exist from the first probe on (the cache's WaitForCacheSync only sees informers created so far,
	// and the controller creates its own only once it starts).
	var synced []func() bool
	for _, obj := range []client.Object{&Foo{}, &appsv1.Deployment{}} {
		inf, err := mgr.GetCache().GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		synced = append(synced, inf.HasSynced)
	}
	_ = mgr.AddReadyzCheck("informer-sync", func(*http.Request) error {
		for _, hasSynced := range synced {
			if !hasSynced() {
				return fmt.Errorf("informers not synced")
			}
		}
		return nil
	})
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
