package bridge

import (
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// client-go's informers hand out any. These give what they hold as Go type P (the kind's own
// type, or client.Object for any kind's objects), so that the bridge's handlers are typed and
// nothing else in it asserts a kind.

// as is obj as P; ok is false for anything else.
func as[P any](obj any) (P, bool) {
	p, ok := obj.(P)
	return p, ok
}

// handler is an informer's event handler for objects of Go type P; a nil func ignores its
// notifications, as do all of them for an object of another type.
type handler[P any] struct {
	add    func(obj P, isInInitialList bool)
	update func(old, cur P)
	// delete is given the object's last state known, a tombstone's if the deletion was missed.
	delete func(obj P)
}

func (h handler[P]) funcs() cache.ResourceEventHandler {
	var f cache.ResourceEventHandlerDetailedFuncs
	if h.add != nil {
		f.AddFunc = func(obj any, isInInitialList bool) {
			if p, ok := as[P](obj); ok {
				h.add(p, isInInitialList)
			}
		}
	}
	if h.update != nil {
		f.UpdateFunc = func(oldObj, newObj any) {
			old, ok := as[P](oldObj)
			cur, ok2 := as[P](newObj)
			if ok && ok2 {
				h.update(old, cur)
			}
		}
	}
	if h.delete != nil {
		f.DeleteFunc = func(obj any) {
			if tombstone, ok := as[cache.DeletedFinalStateUnknown](obj); ok {
				obj = tombstone.Obj
			}
			if p, ok := as[P](obj); ok {
				h.delete(p)
			}
		}
	}
	return f
}

// typed makes f, of an object of Go type P, a function of any object: ok is false for an
// object of another type, and for every object if f is nil.
func typed[P client.Object, R any](f func(P) R) func(obj any) (R, bool) {
	return func(obj any) (R, bool) {
		p, ok := as[P](obj)
		if !ok || f == nil {
			var none R
			return none, false
		}
		return f(p), true
	}
}

// getAs is the object store holds under key, if it holds one of Go type P.
func getAs[P any](store cache.Store, key string) (P, bool) {
	obj, exists, err := store.GetByKey(key)
	if err != nil || !exists {
		var none P
		return none, false
	}
	return as[P](obj)
}

// listAs are the objects of Go type P in objs (a store's list, an index's objects).
func listAs[P any](objs []any) []P {
	list := make([]P, 0, len(objs))
	for _, obj := range objs {
		if p, ok := as[P](obj); ok {
			list = append(list, p)
		}
	}
	return list
}
