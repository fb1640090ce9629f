package localcluster

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// StorageClassName is the default StorageClass of the local cluster. Its
// volumes are made by RunProvisioner.
const StorageClassName = "standard"

// Provisioner is the provisioner name on the StorageClass.
const Provisioner = "local.ml.example.com/simulated"

// DefaultStorageClass is the cluster's default StorageClass. Its simulated
// volumes take any access mode, so it is marked as serving ReadWriteMany
// (mlv1.AnnotationReadWriteMany): multi-rank jobs spread over the
// simulated nodes.
func DefaultStorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name: StorageClassName,
			Annotations: map[string]string{
				"storageclass.kubernetes.io/is-default-class": "true",
				mlv1.AnnotationReadWriteMany:                  "true",
			},
		},
		Provisioner:       Provisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
}

// VolumeFor is the PersistentVolume the simulated provisioner makes for a
// claim: the claim's size, access modes and class, pre-bound to it so the
// real PV controller binds the pair. Nothing is stored: kwok runs no
// containers.
func VolumeFor(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	modes := pvc.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "pvc-" + string(pvc.UID),
			Labels: map[string]string{"local.ml.example.com/claim-namespace": pvc.Namespace},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   modes,
			StorageClassName:              ptr.Deref(pvc.Spec.StorageClassName, ""),
			VolumeMode:                    pvc.Spec.VolumeMode,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/simulated-volumes/" + string(pvc.UID)},
			},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
		},
	}
}

// RunProvisioner plays a dynamic volume provisioner until ctx is done: every
// unbound claim gets a PersistentVolume made for it. Without it no pod
// mounting a PVC (every TrainingJob's checkpoint volume) could be scheduled.
func (c *Cluster) RunProvisioner(ctx context.Context, log io.Writer) error {
	if err := c.Client.Create(ctx, DefaultStorageClass()); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default StorageClass: %w", err)
	}
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			claims := &corev1.PersistentVolumeClaimList{}
			if err := c.Client.List(ctx, claims); err != nil {
				continue
			}
			for i := range claims.Items {
				pvc := &claims.Items[i]
				if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil || pvc.Status.Phase != corev1.ClaimPending {
					continue
				}
				if err := c.Client.Create(ctx, VolumeFor(pvc)); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
					fmt.Fprintf(log, "provisioning a volume for %s/%s: %v\n", pvc.Namespace, pvc.Name, err)
				}
			}
		}
	}()
	return nil
}
