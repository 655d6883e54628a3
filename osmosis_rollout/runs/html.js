(function(){
const table=document.getElementById('rows');if(!table)return;
const groups=Array.from(table.querySelectorAll('tbody.group'));
const search=document.getElementById('search'),errSel=document.getElementById('errtype'),count=document.getElementById('count');
let kind='all';
function apply(){const q=search.value.trim().toLowerCase(),et=errSel.value;let shown=0;
 groups.forEach(g=>{const r=g.rows[0];let ok=kind==='all'||r.dataset.outcome===kind||(' '+r.dataset.change+' ').indexOf(' '+kind+' ')>=0;
  if(ok&&et)ok=(' '+r.dataset.errors+' ').indexOf(' '+et+' ')>=0;
  if(ok&&q)ok=g.dataset.text.indexOf(q)>=0;
  g.hidden=!ok;if(ok)shown++;});
 count.textContent='showing '+shown+' of '+groups.length+' rows';}
function setKind(k){kind=k;document.querySelectorAll('.filters button').forEach(x=>x.classList.toggle('on',x.dataset.kind===k));apply();}
function toggle(g,open){g.classList.toggle('open',open);g.rows[0].setAttribute('aria-expanded',String(g.classList.contains('open')));
 if(g.classList.contains('open'))history.replaceState(null,'','#'+g.id);}
document.querySelectorAll('.filters button').forEach(b=>b.addEventListener('click',()=>setKind(b.dataset.kind)));
search.addEventListener('input',apply);errSel.addEventListener('change',apply);
groups.forEach(g=>{const r=g.rows[0];
 r.addEventListener('click',e=>{if(e.target.closest('a'))return;toggle(g);});
 r.addEventListener('keydown',e=>{
  if(e.key==='Enter'||e.key===' '){e.preventDefault();toggle(g);return;}
  if(e.key!=='ArrowDown'&&e.key!=='ArrowUp')return;
  e.preventDefault();const shown=Array.from(table.querySelectorAll('tbody.group:not([hidden])'));
  const next=shown[shown.indexOf(g)+(e.key==='ArrowDown'?1:-1)];if(next)next.rows[0].focus();});});
// A missing value (an errored row's reward) sorts as the lowest: first ascending, last descending.
table.querySelectorAll('th.sortable').forEach(th=>th.addEventListener('click',()=>{
 const col=Number(th.dataset.col),numeric=th.dataset.type==='num';
 const dir=th.getAttribute('aria-sort')==='ascending'?-1:1;
 table.querySelectorAll('th.sortable').forEach(x=>x.removeAttribute('aria-sort'));
 th.setAttribute('aria-sort',dir===1?'ascending':'descending');
 const key=g=>g.rows[0].cells[col].dataset.v||'';
 const sorted=groups.slice().sort((a,b)=>{const x=key(a),y=key(b);
  if(numeric){const fx=x===''?NaN:Number(x),fy=y===''?NaN:Number(y);
   if(isNaN(fx)&&isNaN(fy))return 0;if(isNaN(fx))return -dir;if(isNaN(fy))return dir;return dir*(fx-fy);}
  return dir*x.localeCompare(y,undefined,{numeric:true});});
 sorted.forEach(g=>table.appendChild(g));}));
function follow(){const id=decodeURIComponent(location.hash.slice(1));const g=id&&document.getElementById(id);
 if(!g||!g.classList.contains('group'))return;
 if(g.hidden){search.value='';errSel.value='';setKind('all');}
 toggle(g,true);g.rows[0].focus({preventScroll:true});g.scrollIntoView({block:'start'});}
window.addEventListener('hashchange',follow);
// On load too: the browser's own jump to the fragment takes the focus back to the page.
window.addEventListener('load',follow);
apply();follow();
})();
