import numpy as np, mpmath as mp
from mechanisms.gaussian import Gaussian
mp.mp.dps=90
g=Gaussian(1.3,0.7); mu=0.7/1.3
edges=np.linspace(-20,20,301)
mm,err=g.pld_cell_masses(edges)
zs=[-mp.inf]+[(mp.mpf(e)-mp.mpf(mu)**2/2)/mu for e in edges]+[mp.inf]
ref=[mp.ncdf(b)-mp.ncdf(a) for a,b in zip(zs[:-1],zs[1:])]
for i,(a,b,e) in enumerate(zip(mm,ref,err)):
    if abs(mp.mpf(a)-b)>e: print(i, float(zs[i]), a, float(b), e)
